package probe

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/netprober/prober/api"
)

// An engine is single-family: its source address says which. An agent
// with both families opens one engine of each.

const ipv6HeaderLen = 40

// FlowLabel is the IPv6 flow label (RFC 6437) of the TCP flow from src to
// dst, 0 for IPv4. IPv6 ECMP may hash the flow label with the 5-tuple, so
// a flow's regular probes and its traceroute probes must carry the same
// one, or the trace would follow another path than the loss it explains;
// every probe of a flow therefore carries this label, a function of the
// 5-tuple alone. It is never 0 (RFC 6437 §2: "not labelled"), and it is
// the same after an agent restarts, as the flow's path is. It is not
// secret: our probes' labels need not resist an off-path attacker.
func FlowLabel(src, dst netip.AddrPort) uint32 {
	if !isIPv6(src.Addr()) || !isIPv6(dst.Addr()) {
		return 0
	}
	if h := flowHash(src, dst); h != 0 {
		return h
	}
	return 1
}

// flowHash is FNV-1a over the 5-tuple, folded to 20 bits; by hand, as
// hash/fnv's interface would allocate per packet.
func flowHash(src, dst netip.AddrPort) uint32 {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	for _, a := range [2]netip.AddrPort{src, dst} {
		for _, c := range a.Addr().As16() {
			h = (h ^ uint32(c)) * prime
		}
		h = (h ^ uint32(a.Port()>>8)) * prime
		h = (h ^ uint32(a.Port()&0xff)) * prime
	}
	return (h ^ h>>20) & 0xfffff
}

// isIPv6 reports whether a is an IPv6 address an engine can use: not an
// IPv4-mapped one (that is IPv4 on the wire) and without a zone, which no
// packet header carries.
func isIPv6(a netip.Addr) bool { return a.Is6() && !a.Is4In6() && a.Zone() == "" }

// familyOK reports whether a is a source address an engine can use.
func familyOK(a netip.Addr) bool { return a.Is4() || isIPv6(a) }

// sameFamily reports whether dst can be reached from an engine on src.
func sameFamily(src, dst netip.Addr) bool {
	return src.Is4() && dst.Is4() || isIPv6(src) && isIPv6(dst)
}

// errOtherFamily is what an engine on src says of a target dst of the
// other family.
func errOtherFamily(engine string, src, dst netip.Addr) error {
	return fmt.Errorf("%s: target %s is not an %s address like the source %s", engine, dst, api.FamilyName(api.FamilyOf(src)), src)
}

// putIPv6Header writes into b[:40] the IPv6 header of a packet of
// payload bytes of protocol proto from src to dst. An IPv6 raw socket
// delivers the payload alone (RFC 3542 §3), so the reader synthesizes
// the header from recvfrom's source address to keep the engines' "recv
// returns a whole IP packet": the decoders then take both families by
// the version nibble. Traffic class, flow label and hop limit are not
// known, and are 0.
func putIPv6Header(b []byte, payload int, proto uint8, src, dst *[16]byte) {
	_ = b[ipv6HeaderLen-1]
	b[0], b[1], b[2], b[3] = 6<<4, 0, 0, 0
	binary.BigEndian.PutUint16(b[4:], uint16(payload))
	b[6], b[7] = proto, 0
	copy(b[8:24], src[:])
	copy(b[24:40], dst[:])
}
