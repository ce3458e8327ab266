package probe

import (
	"encoding/binary"
	"net/netip"
)

// ICMP messages a traceroute reads (RFC 792; ICMPv6, RFC 4443 §3).
const (
	icmpDestUnreachable  = 3
	icmpTimeExceeded     = 11
	icmp6DestUnreachable = 1
	icmp6TimeExceeded    = 3
	// Path MTU discovery's: "fragmentation needed and DF set" (a
	// Destination Unreachable code) and "packet too big".
	icmpFragNeeded    = 4
	icmp6PacketTooBig = 2
)

// icmpQuote is what the tracer needs of an ICMP error: who sent it, what
// kind it is, and the quoted header of the probe that caused it.
type icmpQuote struct {
	from       netip.Addr // the router or host that sent the error
	to         netip.Addr // the outer destination: us
	typ, code  uint8
	src, dst   netip.Addr // the quoted probe's addresses
	ipID       uint16     // IPv4 only
	flowLabel  uint32     // IPv6 only
	sport      uint16
	dport      uint16
	seq        uint32
	quotedTTL  uint8 // TTL (hop limit) left in the quote: 0 or 1 for Time Exceeded
	quotedSize int   // bytes of the quoted datagram present
}

// unreachable reports whether q is a Destination Unreachable (on IPv6
// also a Packet Too Big, IPv4's "fragmentation needed" being an
// Unreachable's code), not a Time Exceeded: the probe went no further.
func (q icmpQuote) unreachable() bool {
	if q.from.Is4() {
		return q.typ == icmpDestUnreachable
	}
	return q.typ == icmp6DestUnreachable || q.typ == icmp6PacketTooBig
}

// decodeQuote parses an IP packet carrying an ICMP Time Exceeded or
// Destination Unreachable that quotes a TCP segment: IPv4 and ICMP, or
// IPv6 (as the raw socket's reader synthesizes it) and ICMPv6, by the
// version nibble. RFC 792 guarantees only the quoted IP header and the
// first 8 bytes of its payload, which for TCP are the ports and the
// sequence number: exactly what the tracer encodes its probes in. It is
// hand-rolled rather than gopacket's layers.TCP, which needs a whole
// 20-byte header, and it does not allocate: it runs on the reader's hot
// path.
func decodeQuote(b []byte) (icmpQuote, bool) {
	if len(b) > 0 && b[0]>>4 == 6 {
		return decodeQuote6(b)
	}
	q, _, ok := quote4(b)
	return q, ok && (q.typ == icmpTimeExceeded || q.typ == icmpDestUnreachable)
}

// decodeTooBig parses an ICMP "fragmentation needed" or ICMPv6 "packet
// too big" quoting a TCP segment, as decodeQuote does, and the path MTU
// it carries.
func decodeTooBig(b []byte) (icmpQuote, int, bool) {
	if len(b) > 0 && b[0]>>4 == 6 {
		q, icmp, ok := quote6(b)
		if !ok || q.typ != icmp6PacketTooBig {
			return q, 0, false
		}
		return q, int(binary.BigEndian.Uint32(icmp[4:])), true
	}
	q, icmp, ok := quote4(b)
	if !ok || q.typ != icmpDestUnreachable || q.code != icmpFragNeeded {
		return q, 0, false
	}
	return q, int(binary.BigEndian.Uint16(icmp[6:])), true
}

// quote4 parses an IPv4 packet carrying an ICMP error of any type that
// quotes a TCP segment; it returns the ICMP message too.
func quote4(b []byte) (icmpQuote, []byte, bool) {
	var q icmpQuote
	ihl, ok := ipv4Header(b, 1)
	if !ok || len(b) < ihl+8 {
		return q, nil, false
	}
	q.from = netip.AddrFrom4([4]byte(b[12:16]))
	q.to = netip.AddrFrom4([4]byte(b[16:20]))
	icmp := b[ihl:]
	q.typ, q.code = icmp[0], icmp[1]
	inner := icmp[8:]
	iihl, ok := ipv4Header(inner, 6)
	if !ok || len(inner) < iihl+8 {
		return q, nil, false
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
	return q, icmp, true
}

// decodeQuote6 is decodeQuote's IPv6 form: the IPv6 header, 8 bytes of
// ICMPv6 header, then the quoted IPv6 header and at least 8 bytes of TCP
// (RFC 4443 quotes as much as fits in 1280 bytes), Packet Too Big
// included. Our probes carry no extension headers, so a quote with any
// is not ours and is refused.
func decodeQuote6(b []byte) (icmpQuote, bool) {
	q, _, ok := quote6(b)
	return q, ok && (q.typ == icmp6TimeExceeded || q.typ == icmp6DestUnreachable || q.typ == icmp6PacketTooBig)
}

// quote6 is quote4's IPv6 form.
func quote6(b []byte) (icmpQuote, []byte, bool) {
	var q icmpQuote
	if !ipv6Header(b, 58) || len(b) < ipv6HeaderLen+8 {
		return q, nil, false
	}
	q.from = netip.AddrFrom16([16]byte(b[8:24]))
	q.to = netip.AddrFrom16([16]byte(b[24:40]))
	icmp := b[ipv6HeaderLen:]
	q.typ, q.code = icmp[0], icmp[1]
	inner := icmp[8:]
	if !ipv6Header(inner, 6) || len(inner) < ipv6HeaderLen+8 {
		return q, nil, false
	}
	q.flowLabel = binary.BigEndian.Uint32(inner[0:]) & 0xfffff
	q.quotedTTL = inner[7]
	q.src = netip.AddrFrom16([16]byte(inner[8:24]))
	q.dst = netip.AddrFrom16([16]byte(inner[24:40]))
	tcp := inner[ipv6HeaderLen:]
	q.sport = binary.BigEndian.Uint16(tcp[0:])
	q.dport = binary.BigEndian.Uint16(tcp[2:])
	q.seq = binary.BigEndian.Uint32(tcp[4:])
	q.quotedSize = len(inner)
	return q, icmp, true
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

// ipv6Header checks that b starts with an IPv6 header whose next header
// is proto.
func ipv6Header(b []byte, proto uint8) bool {
	return len(b) >= ipv6HeaderLen && b[0]>>4 == 6 && b[6] == proto
}

// Probe identity. A probe's TTL and number ride in the two fields that
// every reply carries back: the TCP sequence number (quoted by Time
// Exceeded, acknowledged +1 by the destination's SYN-ACK or RST) and, on
// IPv4, the IP ID (quoted only; IPv6 has no ID outside fragments, and its
// quotes are matched on the flow label instead). The sequence number's
// high 16 bits are a nonce drawn per trace of a flow, so an answer to an earlier trace of the same
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
