package lab

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The nfnetlink_queue protocol (linux/netfilter/nfnetlink_queue.h,
// nfnetlink.h), as far as the delay fault speaks it: bind a queue, read
// each packet's id, accept it later. Every message is a netlink message
// of type NFNL_SUBSYS_QUEUE<<8 | msg whose payload is a struct nfgenmsg
// and then attributes. Netlink lengths and attribute headers are in host
// order; the queue's own fields (queue number, packet id, verdict) are
// big-endian. This file only builds and reads byte slices; the socket is
// in delay_linux.go.

const (
	nfnlSubsysQueue = 3 // NFNL_SUBSYS_QUEUE
	nfnetlinkV0     = 0 // NFNETLINK_V0

	// Message types.
	nfqMsgPacket       = 0 // NFQNL_MSG_PACKET: kernel -> us
	nfqMsgVerdict      = 1 // NFQNL_MSG_VERDICT
	nfqMsgConfig       = 2 // NFQNL_MSG_CONFIG
	nfqMsgVerdictBatch = 3 // NFQNL_MSG_VERDICT_BATCH: every id up to one

	// Packet and verdict attributes.
	nfqaPacketHdr  = 1 // NFQA_PACKET_HDR: struct nfqnl_msg_packet_hdr
	nfqaVerdictHdr = 2 // NFQA_VERDICT_HDR: struct nfqnl_msg_verdict_hdr
	nfqaTimestamp  = 4 // NFQA_TIMESTAMP: struct nfqnl_msg_packet_timestamp

	// Configuration attributes.
	nfqaCfgCmd      = 1 // NFQA_CFG_CMD: struct nfqnl_msg_config_cmd
	nfqaCfgParams   = 2 // NFQA_CFG_PARAMS: struct nfqnl_msg_config_params
	nfqaCfgQueueLen = 3 // NFQA_CFG_QUEUE_MAXLEN: be32
	nfqaCfgMask     = 4 // NFQA_CFG_MASK: be32, the flags being set
	nfqaCfgFlags    = 5 // NFQA_CFG_FLAGS: be32

	nfqCmdBind = 1 // NFQNL_CFG_CMD_BIND

	nfqCopyMeta = 1 // NFQNL_COPY_META: no payload, the header only

	// NFQA_CFG_F_FAIL_OPEN: accept, rather than drop, what does not fit
	// the queue or our socket. NFQA_CFG_F_GSO: hand a GSO packet over
	// whole instead of segmenting it first, one id for all.
	nfqFailOpen = 1 << 0
	nfqGSO      = 1 << 2

	nfAccept = 1 // NF_ACCEPT

	// Netlink's own message types.
	nlmsgNoop  = 1 // NLMSG_NOOP
	nlmsgError = 2 // NLMSG_ERROR: a negated errno (0: an ack), host order
	nlmsgDone  = 3 // NLMSG_DONE
)

// nfqType is the netlink message type of queue message msg.
func nfqType(msg uint8) uint16 { return nfnlSubsysQueue<<8 | uint16(msg) }

// nfgenmsg is struct nfgenmsg: family (AF_UNSPEC here), version, and the
// queue number as res_id.
func nfgenmsg(queue uint16) []byte {
	return binary.BigEndian.AppendUint16([]byte{0, nfnetlinkV0}, queue)
}

// appendAttr appends a netlink attribute: length and type in host order,
// data padded to 4 bytes.
func appendAttr(b []byte, typ uint16, data []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// nfqCmd is an NFQNL_MSG_CONFIG payload with one command for queue:
// struct nfqnl_msg_config_cmd {u8 command; u8 pad; be16 pf}, pf unused
// since Linux 3.8.
func nfqCmd(queue uint16, cmd uint8) []byte {
	return appendAttr(nfgenmsg(queue), nfqaCfgCmd, []byte{cmd, 0, 0, 0})
}

// nfqConfig is the NFQNL_MSG_CONFIG payload that sets a bound queue up:
// metadata only (struct nfqnl_msg_config_params {be32 copy_range; u8
// copy_mode}, packed: 5 bytes), at most maxLen packets held, fail open,
// GSO packets whole. The kernel takes NFQA_CFG_FLAGS only with
// NFQA_CFG_MASK beside it.
func nfqConfig(queue uint16, maxLen uint32) []byte {
	b := appendAttr(nfgenmsg(queue), nfqaCfgParams, []byte{0, 0, 0, 0, nfqCopyMeta})
	b = appendAttr(b, nfqaCfgQueueLen, binary.BigEndian.AppendUint32(nil, maxLen))
	b = appendAttr(b, nfqaCfgMask, binary.BigEndian.AppendUint32(nil, nfqFailOpen|nfqGSO))
	return appendAttr(b, nfqaCfgFlags, binary.BigEndian.AppendUint32(nil, nfqFailOpen|nfqGSO))
}

// nfqVerdict is an NFQNL_MSG_VERDICT (or, batch, NFQNL_MSG_VERDICT_BATCH:
// every packet up to id) payload: struct nfqnl_msg_verdict_hdr {be32
// verdict; be32 id}.
func nfqVerdict(queue uint16, id, verdict uint32) []byte {
	hdr := binary.BigEndian.AppendUint32(nil, verdict)
	hdr = binary.BigEndian.AppendUint32(hdr, id)
	return appendAttr(nfgenmsg(queue), nfqaVerdictHdr, hdr)
}

var errNotPacket = errors.New("nfqueue: not a packet message")

// nfqPacketID reads the queue and packet id of an NFQNL_MSG_PACKET
// (typ is its netlink message type, data its payload): the id is the
// first field of struct nfqnl_msg_packet_hdr {be32 packet_id; be16
// hw_protocol; u8 hook}. Other attributes are skipped.
func nfqPacketID(typ uint16, data []byte) (queue uint16, id uint32, err error) {
	if typ != nfqType(nfqMsgPacket) {
		return 0, 0, errNotPacket
	}
	if len(data) < 4 {
		return 0, 0, fmt.Errorf("nfqueue: packet message of %d bytes", len(data))
	}
	queue = binary.BigEndian.Uint16(data[2:4])
	for b := data[4:]; len(b) >= 4; {
		n := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) & 0x3fff // without NLA_F_NESTED, NLA_F_NET_BYTEORDER
		if n < 4 || n > len(b) {
			return 0, 0, fmt.Errorf("nfqueue: attribute %d of length %d in %d bytes", typ, n, len(b))
		}
		if typ == nfqaPacketHdr {
			if n < 4+4 {
				return 0, 0, fmt.Errorf("nfqueue: packet header of %d bytes", n-4)
			}
			return queue, binary.BigEndian.Uint32(b[4:8]), nil
		}
		b = b[min((n+3)&^3, len(b)):]
	}
	return 0, 0, errors.New("nfqueue: packet message without a packet header")
}

// nfqPkt is a queued packet as nfqParse reads it: its id, and when the
// kernel stamped it (Unix nanoseconds; 0 when it did not: only while a
// socket in the system asks for receive stamps).
type nfqPkt struct {
	id    uint32
	stamp int64
}

// nfqParse walks the netlink messages of one datagram read from a queue
// socket: it appends each queued packet to pkts, and the errno of each
// error message (a verdict the kernel refused) to errs. It reads every
// message it can, so one refused verdict never hides the packets beside
// it; a malformed message ends the walk, with an error, keeping what
// came before.
func nfqParse(b []byte, pkts []nfqPkt, errs []int32) ([]nfqPkt, []int32, error) {
	const hdrLen = 16 // struct nlmsghdr
	for len(b) >= hdrLen {
		n := int(binary.NativeEndian.Uint32(b[0:4]))
		typ := binary.NativeEndian.Uint16(b[4:6])
		if n < hdrLen || n > len(b) {
			return pkts, errs, fmt.Errorf("nfqueue: netlink message of length %d in %d bytes", n, len(b))
		}
		data := b[hdrLen:n]
		switch typ {
		case nlmsgError:
			if len(data) < 4 {
				return pkts, errs, fmt.Errorf("nfqueue: error message of %d bytes", len(data))
			}
			if e := -int32(binary.NativeEndian.Uint32(data[0:4])); e != 0 {
				errs = append(errs, e)
			}
		case nlmsgNoop, nlmsgDone:
		default:
			if _, id, err := nfqPacketID(typ, data); err == nil {
				pkts = append(pkts, nfqPkt{id: id, stamp: nfqStamp(data)})
			}
		}
		b = b[min((n+3)&^3, len(b)):]
	}
	return pkts, errs, nil
}

// nfqStamp is a packet message's NFQA_TIMESTAMP (struct
// nfqnl_msg_packet_timestamp: be64 seconds, be64 microseconds) in Unix
// nanoseconds, or 0.
func nfqStamp(data []byte) int64 {
	if len(data) < 4 {
		return 0
	}
	for b := data[4:]; len(b) >= 4; {
		n := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) & 0x3fff
		if n < 4 || n > len(b) {
			return 0
		}
		if typ == nfqaTimestamp && n >= 4+16 {
			sec, usec := binary.BigEndian.Uint64(b[4:12]), binary.BigEndian.Uint64(b[12:20])
			if sec > 1<<33 || usec >= 1e6 {
				return 0
			}
			return int64(sec)*1e9 + int64(usec)*1e3
		}
		b = b[min((n+3)&^3, len(b)):]
	}
	return 0
}
