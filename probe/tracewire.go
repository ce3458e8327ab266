package probe

import (
	"encoding/binary"
	"net/netip"
)

// ICMP messages a traceroute reads (RFC 792).
const (
	icmpDestUnreachable = 3
	icmpTimeExceeded    = 11
)

// icmpQuote is what the tracer needs of an ICMP error: who sent it, what
// kind it is, and the quoted header of the probe that caused it.
type icmpQuote struct {
	from       netip.Addr // the router or host that sent the error
	to         netip.Addr // the outer destination: us
	typ, code  uint8
	src, dst   netip.Addr // the quoted probe's addresses
	ipID       uint16
	sport      uint16
	dport      uint16
	seq        uint32
	quotedTTL  uint8 // TTL left in the quote: 0 or 1 for Time Exceeded
	quotedSize int   // bytes of the quoted datagram present
}

// decodeQuote parses an IPv4 packet carrying an ICMP Time Exceeded or
// Destination Unreachable that quotes a TCP segment. RFC 792 guarantees
// only the quoted IP header and the first 8 bytes of its payload, which
// for TCP are the ports and the sequence number: exactly what the tracer
// encodes its probes in. It is hand-rolled rather than gopacket's
// layers.TCP, which needs a whole 20-byte header, and it does not
// allocate: it runs on the reader's hot path.
func decodeQuote(b []byte) (icmpQuote, bool) {
	var q icmpQuote
	ihl, ok := ipv4Header(b, 1)
	if !ok || len(b) < ihl+8 {
		return q, false
	}
	q.from = netip.AddrFrom4([4]byte(b[12:16]))
	q.to = netip.AddrFrom4([4]byte(b[16:20]))
	icmp := b[ihl:]
	q.typ, q.code = icmp[0], icmp[1]
	if q.typ != icmpTimeExceeded && q.typ != icmpDestUnreachable {
		return q, false
	}
	inner := icmp[8:]
	iihl, ok := ipv4Header(inner, 6)
	if !ok || len(inner) < iihl+8 {
		return q, false
	}
	q.ipID = binary.BigEndian.Uint16(inner[4:])
	q.quotedTTL = inner[8]
	q.src = netip.AddrFrom4([4]byte(inner[12:16]))
	q.dst = netip.AddrFrom4([4]byte(inner[16:20]))
	tcp := inner[iihl:]
	q.sport = binary.BigEndian.Uint16(tcp[0:])
	q.dport = binary.BigEndian.Uint16(tcp[2:])
	q.seq = binary.BigEndian.Uint32(tcp[4:])
	q.quotedSize = len(inner)
	return q, true
}

// ipv4Header checks that b starts with an IPv4 header of protocol proto
// and returns its length.
func ipv4Header(b []byte, proto uint8) (int, bool) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return 0, false
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || len(b) < ihl || b[9] != proto {
		return 0, false
	}
	return ihl, true
}

// Probe identity. A probe's TTL and number ride in the two fields that
// every reply carries back: the TCP sequence number (quoted by Time
// Exceeded, acknowledged +1 by the destination's SYN-ACK or RST) and the
// IP ID (quoted only). The sequence number's high 16 bits are a nonce
// drawn per trace of a flow, so an answer to an earlier trace of the same
// 5-tuple never matches a later one (fbtracert encodes a timestamp there
// for the same reason).
func traceSeq(nonce uint16, ttl, probe uint8) uint32 {
	return uint32(nonce)<<16 | uint32(ttl)<<8 | uint32(probe)
}

func traceIPID(ttl, probe uint8) uint16 { return uint16(ttl)<<8 | uint16(probe) }

// splitSeq undoes traceSeq.
func splitSeq(seq uint32) (nonce uint16, ttl, probe uint8) {
	return uint16(seq >> 16), uint8(seq >> 8), uint8(seq)
}
