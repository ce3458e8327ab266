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
// for the rule in its comment. Register 1 is the 16-byte NFT_REG_1;
// 9, 10, 11 are the 4-byte registers after NFT_REG32_00 (8), which
// concatenations use.

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

// meta nfproto ipv4
func isIPv4() []expr.Any { return metaIs(expr.MetaKeyNFPROTO, []byte{unix.NFPROTO_IPV4}) }

// meta l4proto tcp
func isTCP() []expr.Any { return metaIs(expr.MetaKeyL4PROTO, []byte{unix.IPPROTO_TCP}) }

// oifname "dev" / iifname "dev"
func oifIs(dev string) []expr.Any { return metaIs(expr.MetaKeyOIFNAME, ifname(dev)) }
func iifIs(dev string) []expr.Any { return metaIs(expr.MetaKeyIIFNAME, ifname(dev)) }

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

// ip saddr PREFIX (src) or ip daddr PREFIX
func ipIn(src bool, p netip.Prefix) []expr.Any {
	off := uint32(16)
	if src {
		off = 12
	}
	p = p.Masked()
	mask := netipMask(p.Bits())
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Addr().AsSlice()},
	}
}

func netipMask(bits int) []byte {
	m := uint32(0xffffffff) << (32 - bits)
	if bits == 0 {
		m = 0
	}
	return binaryutil.BigEndian.PutUint32(m)
}

// jhash ip saddr . ip daddr . tcp sport . tcp dport mod m == 0: a fixed
// subset of TCP 5-tuples (the protocol being fixed), as a bad ECMP member
// or TCAM entry drops.
func flowHashIsZero(m int) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Payload{DestRegister: 10, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
		&expr.Payload{DestRegister: 11, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Hash{SourceRegister: 1, DestRegister: 1, Length: 16, Modulus: uint32(m), Seed: blackholeSeed, Type: expr.HashTypeJenkins},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: make([]byte, 4)},
	}
}

// blackholeSeed fixes jhash's seed, which the kernel otherwise draws at
// random per rule: the same flows die on every run.
const blackholeSeed = 0x5eed

func drop() expr.Any { return &expr.Verdict{Kind: expr.VerdictDrop} }

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

func prefix32(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, 32) }
