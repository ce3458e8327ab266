package probe

import "encoding/binary"

// ICMP echo wire format (RFC 792; ICMPv6, RFC 4443 §4): type, code,
// checksum, identifier, sequence, then data. Hand-rolled rather than
// icmp.Message.Marshal so the hot path does not allocate;
// golang.org/x/net/icmp still owns the socket.
const (
	icmpEchoReply    = 0
	icmpEchoRequest  = 8
	icmp6EchoRequest = 128
	icmp6EchoReply   = 129
	icmpHeaderLen    = 8
	icmpPayloadLen   = 16
)

// icmpMagic marks our payloads, so a reply to somebody else's echo with the
// same identifier (raw sockets see them all) is not taken for ours.
var icmpMagic = [8]byte{'p', 'r', 'o', 'b', 'e', 'r', 0, 1}

// echoTypes returns the echo request and reply types of a family.
func echoTypes(ipv6 bool) (request, reply uint8) {
	if ipv6 {
		return icmp6EchoRequest, icmp6EchoReply
	}
	return icmpEchoRequest, icmpEchoReply
}

// encodeEcho writes an echo request into b (at least 24 bytes) and returns
// the used part. An ICMPv6 checksum covers a pseudo-header of addresses
// only the kernel knows for sure (it picks the source of a datagram
// socket), and the kernel fills it on both socket kinds (RFC 3542 §3.1):
// it is left 0.
func encodeEcho(b []byte, ipv6 bool, id, seq uint16) []byte {
	b = b[:icmpHeaderLen+icmpPayloadLen]
	b[0], _ = echoTypes(ipv6)
	b[1] = 0
	b[2], b[3] = 0, 0
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	copy(b[8:], icmpMagic[:])
	clear(b[16:])
	if !ipv6 {
		binary.BigEndian.PutUint16(b[2:], checksum(b))
	}
	return b
}

// echoReply is the part of an echo reply the matcher needs.
type echoReply struct {
	id, seq uint16
}

// decodeEcho parses an ICMP or ICMPv6 message (no IP header) and reports
// whether it is an echo reply carrying our magic.
func decodeEcho(b []byte, ipv6 bool) (echoReply, bool) {
	_, reply := echoTypes(ipv6)
	if len(b) < icmpHeaderLen+len(icmpMagic) || b[0] != reply || b[1] != 0 {
		return echoReply{}, false
	}
	if [8]byte(b[8:16]) != icmpMagic {
		return echoReply{}, false
	}
	return echoReply{id: binary.BigEndian.Uint16(b[4:]), seq: binary.BigEndian.Uint16(b[6:])}, true
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var s uint32
	for ; len(b) >= 2; b = b[2:] {
		s += uint32(b[0])<<8 | uint32(b[1])
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s>>16 != 0 {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}
