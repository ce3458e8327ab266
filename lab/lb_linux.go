package lab

import (
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// lbTable is the LB's NAT table in the LB namespace, one per family.
const lbTable = "prober_lb"

// ipsDstNAT is IPS_DST_NAT of enum ip_conntrack_status.
const ipsDstNAT = 1 << 5

// lb installs the one-arm load balancer, for each family the fabric has:
//
//	table ip prober_lb {
//	  map backends { type integer : ipv4_addr; elements = { 0 : n11, 1 : n12, ... } }
//	  chain prerouting { type nat hook prerouting priority -100;
//	    ip daddr VIP meta l4proto tcp [tcp dport P] dnat to numgen random mod N map @backends }
//	  chain postrouting { type nat hook postrouting priority 100;
//	    ct status dnat snat to LBSource }
//	}
//
// and its twin table ip6 prober_lb (ipv6_addr, VIP6, LBSource6). DNAT
// without a port keeps the client's destination port. SNAT to an
// LB-owned address makes the backend answer through the LB, which must
// un-NAT the reply: without it the backend would answer the client
// directly from its own address and the client would reset.
func (b *builder) lb() error {
	f := b.plan.fabric
	return nftIn(nsName(f.Spec.Prefix, KindLB), func(c *nftables.Conn) error {
		for _, fam := range familiesOf(f.Spec) {
			vip, src, backends := fam.lbFields(f)
			if err := lbNAT(c, fam, *vip, *src, *backends, f.Spec.LBPorts); err != nil {
				return err
			}
		}
		return nil
	})
}

// lbNAT queues one family's table.
func lbNAT(c *nftables.Conn, fam *family, vip, src netip.Addr, backends []netip.Addr, ports []uint16) error {
	tf, addrType, proto := nftables.TableFamilyIPv4, nftables.TypeIPAddr, uint32(unix.NFPROTO_IPV4)
	if fam.is6() {
		tf, addrType, proto = nftables.TableFamilyIPv6, nftables.TypeIP6Addr, unix.NFPROTO_IPV6
	}
	t := c.AddTable(&nftables.Table{Family: tf, Name: lbTable})
	set := &nftables.Set{
		Table: t, Name: "backends", IsMap: true, Constant: true,
		KeyType: nftables.TypeInteger, DataType: addrType,
		KeyByteOrder: binaryutil.NativeEndian,
	}
	var elems []nftables.SetElement
	for i, a := range backends {
		elems = append(elems, nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(uint32(i)), Val: a.AsSlice()})
	}
	if err := c.AddSet(set, elems); err != nil {
		return err
	}
	pre := c.AddChain(baseChain(t, "prerouting", nftables.ChainTypeNAT, nftables.ChainHookPrerouting, -100))
	dnat := []expr.Any{
		&expr.Numgen{Register: 1, Modulus: uint32(len(backends)), Type: unix.NFT_NG_RANDOM},
		&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: set.Name, SetID: set.ID},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: proto, RegAddrMin: 1},
	}
	toVIP := rule(ipIn(false, fam.host(vip)), isTCP())
	if len(ports) == 0 {
		c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: rule(toVIP, dnat)})
	}
	for _, port := range ports {
		dport := []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: rule(toVIP, dport, dnat)})
	}
	post := c.AddChain(baseChain(t, "postrouting", nftables.ChainTypeNAT, nftables.ChainHookPostrouting, 100))
	c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
		&expr.Immediate{Register: 1, Data: src.AsSlice()},
		&expr.NAT{Type: expr.NATTypeSourceNAT, Family: proto, RegAddrMin: 1},
	}})
	return nil
}
