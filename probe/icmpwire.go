package probe

import "encoding/binary"

// ICMP echo wire format (RFC 792): type, code, checksum, identifier,
// sequence, then data. Hand-rolled rather than icmp.Message.Marshal so the
// hot path does not allocate; golang.org/x/net/icmp still owns the socket.
const (
	icmpEchoReply   = 0
	icmpEchoRequest = 8
	icmpHeaderLen   = 8
	icmpPayloadLen  = 16
)

// icmpMagic marks our payloads, so a reply to somebody else's echo with the
// same identifier (raw sockets see them all) is not taken for ours.
var icmpMagic = [8]byte{'p', 'r', 'o', 'b', 'e', 'r', 0, 1}

// encodeEcho writes an echo request into b (at least 24 bytes) and returns
// the used part.
func encodeEcho(b []byte, id, seq uint16) []byte {
	b = b[:icmpHeaderLen+icmpPayloadLen]
	b[0], b[1] = icmpEchoRequest, 0
	b[2], b[3] = 0, 0
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	copy(b[8:], icmpMagic[:])
	clear(b[16:])
	binary.BigEndian.PutUint16(b[2:], checksum(b))
	return b
}

// echoReply is the part of an echo reply the matcher needs.
type echoReply struct {
	id, seq uint16
}

// decodeEcho parses an ICMP message (no IP header) and reports whether it
// is an echo reply carrying our magic.
func decodeEcho(b []byte) (echoReply, bool) {
	if len(b) < icmpHeaderLen+len(icmpMagic) || b[0] != icmpEchoReply || b[1] != 0 {
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
