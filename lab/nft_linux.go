package lab

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// nftIn runs fn with an nftables connection to namespace ns and flushes
// (commits) what fn queued.
func nftIn(ns string, fn func(c *nftables.Conn) error) error {
	fd, err := netns.GetFromName(ns)
	if err != nil {
		return fmt.Errorf("netns %s: %w", ns, err)
	}
	defer fd.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(fd)))
	if err != nil {
		return fmt.Errorf("netns %s: nftables: %w", ns, err)
	}
	if err := fn(c); err != nil {
		return fmt.Errorf("netns %s: %w", ns, err)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("netns %s: nftables: %w", ns, err)
	}
	return nil
}

// Expression builders, each the netlink form `nft --debug=netlink` shows
// for the rule in its comment. Register 1 is the 16-byte NFT_REG_1, the
// same storage as the 4-byte NFT_REG32_00 (8) to 03 (11); concatenations
// continue with 9, 10, ... 17.

// ifname pads an interface name as meta iifname/oifname compare it.
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

// meta KEY == data
func metaIs(key expr.MetaKey, data []byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data},
	}
}

// meta nfproto ipv4 / meta nfproto ipv6
func isIPv4() []expr.Any { return metaIs(expr.MetaKeyNFPROTO, []byte{unix.NFPROTO_IPV4}) }
func isIPv6() []expr.Any { return metaIs(expr.MetaKeyNFPROTO, []byte{unix.NFPROTO_IPV6}) }

// nfproto matches fam's packets.
func nfproto(fam *family) []expr.Any {
	if fam.is6() {
		return isIPv6()
	}
	return isIPv4()
}

// meta l4proto tcp
func isTCP() []expr.Any { return metaIs(expr.MetaKeyL4PROTO, []byte{unix.IPPROTO_TCP}) }

// meta l4proto udp|tcp
func l4protoIs(proto string) []expr.Any {
	if proto == "udp" {
		return metaIs(expr.MetaKeyL4PROTO, []byte{unix.IPPROTO_UDP})
	}
	return isTCP()
}

// th dport PORT: UDP's and TCP's destination port, the transport
// header's bytes 2-3. After l4protoIs.
func dportIs(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

// oifname "dev" / iifname "dev"
func oifIs(dev string) []expr.Any { return metaIs(expr.MetaKeyOIFNAME, ifname(dev)) }
func iifIs(dev string) []expr.Any { return metaIs(expr.MetaKeyIIFNAME, ifname(dev)) }

// meta length > n: the packet's length from its network header, as
// forward sees it. cmp gt compares bytes (memcmp), so the host-order
// length is turned to network order first, as for numgen below.
func longerThan(n int) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyLEN, Register: 1},
		&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Cmp{Op: expr.CmpOpGt, Register: 1, Data: binaryutil.BigEndian.PutUint32(uint32(n))},
	}
}

// numgen random mod 1000 < permille. numgen yields a host-order integer
// but cmp lt compares bytes (memcmp), so nft converts to network order
// first; so do we.
func randomBelow(permille int) []expr.Any {
	return []expr.Any{
		&expr.Numgen{Register: 1, Modulus: 1000, Type: unix.NFT_NG_RANDOM},
		&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Cmp{Op: expr.CmpOpLt, Register: 1, Data: binaryutil.BigEndian.PutUint32(uint32(permille))},
	}
}

// ip saddr PREFIX (src) or ip daddr PREFIX; ip6 saddr/daddr for an
// IPv6 prefix. It reads the network header at the family's offsets, so
// it belongs after nfproto in an inet table.
func ipIn(src bool, p netip.Prefix) []expr.Any {
	p = p.Masked()
	off, n := addrOffset(p.Addr().Is6(), src)
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: prefixMask(p), Xor: make([]byte, n)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Addr().AsSlice()},
	}
}

// addrOffset is where the source (src) or destination address starts in
// the IPv4 (RFC 791) or IPv6 (RFC 8200) header, and its length.
func addrOffset(is6, src bool) (off, n uint32) {
	switch {
	case is6 && src:
		return 8, 16
	case is6:
		return 24, 16
	case src:
		return 12, 4
	}
	return 16, 4
}

// prefixMask is p's netmask, 4 or 16 bytes.
func prefixMask(p netip.Prefix) []byte {
	m := make([]byte, p.Addr().BitLen()/8)
	for i := range p.Bits() {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return m
}

// jhash ip saddr . ip daddr . tcp sport . tcp dport mod m == 0 (ip6 for
// IPv6): a fixed subset of TCP 5-tuples (the protocol being fixed), as a
// bad ECMP member or TCAM entry drops. Each part of the concatenation
// takes whole 4-byte registers from register 1 (= NFT_REG32_00) on:
// IPv4 uses 4 of them, IPv6 10.
func flowHashIsZero(fam *family, m int) []expr.Any {
	saddr, n := addrOffset(fam.is6(), true)
	daddr, _ := addrOffset(fam.is6(), false)
	words := n / 4
	reg := func(word uint32) uint32 { return 8 + word } // NFT_REG32_00 + word
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: saddr, Len: n},
		&expr.Payload{DestRegister: reg(words), Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: n},
		&expr.Payload{DestRegister: reg(2 * words), Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
		&expr.Payload{DestRegister: reg(2*words + 1), Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Hash{SourceRegister: 1, DestRegister: 1, Length: 4 * (2*words + 2), Modulus: uint32(m), Seed: blackholeSeed, Type: expr.HashTypeJenkins},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: make([]byte, 4)},
	}
}

// meta l4proto ipv6-icmp icmpv6 type 133-137 accept: router and neighbor
// solicitations and advertisements, redirects (RFC 4861).
func ndpAccept() []expr.Any {
	return rule(isIPv6(), metaIs(expr.MetaKeyL4PROTO, []byte{unix.IPPROTO_ICMPV6}), []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: []byte{133}},
		&expr.Cmp{Op: expr.CmpOpLte, Register: 1, Data: []byte{137}},
		&expr.Verdict{Kind: expr.VerdictAccept},
	})
}

// blackholeSeed fixes jhash's seed, which the kernel otherwise draws at
// random per rule: the same flows die on every run.
const blackholeSeed = 0x5eed

func verdictDrop() expr.Any { return &expr.Verdict{Kind: expr.VerdictDrop} }

func rule(parts ...[]expr.Any) []expr.Any {
	var all []expr.Any
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

func baseChain(t *nftables.Table, name string, typ nftables.ChainType, hook *nftables.ChainHook, prio nftables.ChainPriority) *nftables.Chain {
	return &nftables.Chain{Table: t, Name: name, Type: typ, Hooknum: hook, Priority: nftables.ChainPriorityRef(prio)}
}
