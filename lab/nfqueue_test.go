package lab

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
)

// attr is a netlink attribute header (length, type) in host order.
func attr(n, typ uint16) []byte {
	b := binary.NativeEndian.AppendUint16(nil, n)
	return binary.NativeEndian.AppendUint16(b, typ)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestNFQueueEncode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		got, want []byte
	}{
		{"bind queue 3201", nfqCmd(3201, nfqCmdBind), cat(
			[]byte{0, 0, 0x0c, 0x81}, // AF_UNSPEC, v0, be16 3201
			attr(8, 1), []byte{1, 0, 0, 0},
		)},
		{"config", nfqConfig(7, 4096), cat(
			[]byte{0, 0, 0, 7},
			attr(9, 2), []byte{0, 0, 0, 0, 1, 0, 0, 0}, // copy_range 0, NFQNL_COPY_META, padded
			attr(8, 3), []byte{0, 0, 0x10, 0},
			attr(8, 4), []byte{0, 0, 0, 5}, // fail open | GSO
			attr(8, 5), []byte{0, 0, 0, 5},
		)},
		{"accept id 0x01020304", nfqVerdict(1, 0x01020304, nfAccept), cat(
			[]byte{0, 0, 0, 1},
			attr(12, 2), []byte{0, 0, 0, 1, 1, 2, 3, 4},
		)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Equal(tc.got, tc.want) {
				t.Errorf("got  % x\nwant % x", tc.got, tc.want)
			}
			if len(tc.got)%4 != 0 {
				t.Errorf("length %d not a multiple of 4", len(tc.got))
			}
		})
	}
	if got, want := nfqType(nfqMsgVerdict), uint16(0x0301); got != want {
		t.Errorf("nfqType(verdict) = %#x, want %#x", got, want)
	}
}

func TestNFQueueDecode(t *testing.T) {
	t.Parallel()
	hdr := cat(attr(11, 1), []byte{0, 0, 0x12, 0x34, 0x08, 0x00, 2, 0}) // id 0x1234, ETH_P_IP, NF_INET_FORWARD, pad
	mark := cat(attr(8, 3), []byte{0, 0, 0, 0})
	for _, tc := range []struct {
		name    string
		typ     uint16
		data    []byte
		queue   uint16
		id      uint32
		wantErr bool
	}{
		{"header first", nfqType(nfqMsgPacket), cat([]byte{2, 0, 0x0c, 0x81}, hdr, mark), 3201, 0x1234, false},
		{"header after another attribute", nfqType(nfqMsgPacket), cat([]byte{10, 0, 0, 9}, mark, hdr), 9, 0x1234, false},
		{"no header", nfqType(nfqMsgPacket), cat([]byte{2, 0, 0, 9}, mark), 0, 0, true},
		{"verdict, not a packet", nfqType(nfqMsgVerdict), nfqVerdict(9, 1, nfAccept), 0, 0, true},
		{"short header", nfqType(nfqMsgPacket), cat([]byte{2, 0, 0, 9}, attr(6, 1), []byte{0, 1, 0, 0}), 0, 0, true},
		{"attribute longer than the message", nfqType(nfqMsgPacket), cat([]byte{2, 0, 0, 9}, attr(40, 3), []byte{0, 0, 0, 0}), 0, 0, true},
		{"truncated nfgenmsg", nfqType(nfqMsgPacket), []byte{2, 0}, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			queue, id, err := nfqPacketID(tc.typ, tc.data)
			if (err != nil) != tc.wantErr {
				t.Fatalf("nfqPacketID error %v, want error %v", err, tc.wantErr)
			}
			if queue != tc.queue || id != tc.id {
				t.Errorf("nfqPacketID = queue %d id %#x, want queue %d id %#x", queue, id, tc.queue, tc.id)
			}
		})
	}
}

// FuzzNFQueueDecode: nfqPacketID never panics on what a socket hands it.
func FuzzNFQueueDecode(f *testing.F) {
	f.Add(cat([]byte{2, 0, 0, 1}, attr(11, 1), []byte{0, 0, 0, 1, 0x08, 0, 2, 0}))
	f.Add(cat([]byte{2, 0, 0, 1}, attr(3, 1)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		nfqPacketID(nfqType(nfqMsgPacket), data)
	})
}

// TestNFQueueParse: one datagram holding packets and a refused verdict
// yields every packet (with its kernel stamp when it has one) and the
// errno; an ack is no error; a malformed message keeps what came before
// it.
func TestNFQueueParse(t *testing.T) {
	t.Parallel()
	msg := func(typ uint16, data []byte) []byte {
		n := 16 + len(data)
		b := binary.NativeEndian.AppendUint32(nil, uint32(n))
		b = binary.NativeEndian.AppendUint16(b, typ)
		b = append(b, make([]byte, 10)...) // flags, seq, pid
		b = append(b, data...)
		return append(b, make([]byte, (4-n%4)%4)...)
	}
	packet := func(id byte, stamp ...byte) []byte {
		data := cat([]byte{0, 0, 0, 9}, attr(11, 1), []byte{0, 0, 0, id, 0x08, 0x00, 2, 0})
		if len(stamp) > 0 {
			data = cat(data, attr(20, 4), stamp)
		}
		return msg(nfqType(nfqMsgPacket), data)
	}
	errno := func(e int32) []byte {
		return msg(nlmsgError, cat(binary.NativeEndian.AppendUint32(nil, uint32(-e)), make([]byte, 16)))
	}
	// 1,700,000,000 s and 250,000 µs, big-endian.
	stamp := cat(binary.BigEndian.AppendUint64(nil, 1_700_000_000), binary.BigEndian.AppendUint64(nil, 250_000))
	pkts, errs, err := nfqParse(cat(packet(1), errno(2), packet(2, stamp...), errno(0), msg(nlmsgDone, nil), packet(3)), nil, nil)
	want := []nfqPkt{{id: 1}, {id: 2, stamp: 1_700_000_000_250_000_000}, {id: 3}}
	if err != nil || !slices.Equal(pkts, want) || !slices.Equal(errs, []int32{2}) {
		t.Errorf("nfqParse = %v errnos %v, %v; want %v [2] (ENOENT), nil", pkts, errs, err, want)
	}
	bad := cat(packet(4), []byte{200, 0, 0, 0}, make([]byte, 12))
	if pkts, _, err := nfqParse(bad, nil, nil); err == nil || !slices.Equal(pkts, []nfqPkt{{id: 4}}) {
		t.Errorf("a message longer than the datagram: %v, err %v; want packet 4 and an error", pkts, err)
	}
	if pkts, errs, err := nfqParse(nil, nil, nil); err != nil || len(pkts)+len(errs) != 0 {
		t.Errorf("nothing: %v %v %v", pkts, errs, err)
	}
}

// FuzzNFQueueParse: nfqParse never panics on a datagram.
func FuzzNFQueueParse(f *testing.F) {
	f.Add([]byte{20, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 254, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		nfqParse(b, nil, nil)
	})
}
