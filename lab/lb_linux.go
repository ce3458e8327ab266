package lab

import (
	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// lbTable is the LB's NAT table in the LB namespace.
const lbTable = "prober_lb"

// ipsDstNAT is IPS_DST_NAT of enum ip_conntrack_status.
const ipsDstNAT = 1 << 5

// lb installs the one-arm load balancer:
//
//	table ip prober_lb {
//	  map backends { type integer : ipv4_addr; elements = { 0 : n11, 1 : n12, ... } }
//	  chain prerouting { type nat hook prerouting priority -100;
//	    ip daddr VIP meta l4proto tcp [tcp dport P] dnat to numgen random mod N map @backends }
//	  chain postrouting { type nat hook postrouting priority 100;
//	    ct status dnat snat to LBSource }
//	}
//
// DNAT without a port keeps the client's destination port. SNAT to an
// LB-owned address makes the backend answer through the LB, which must
// un-NAT the reply: without it the backend would answer the client
// directly from its own address and the client would reset.
func (b *builder) lb() error {
	f := b.plan.fabric
	return nftIn(nsName(f.Spec.Prefix, KindLB), func(c *nftables.Conn) error {
		t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: lbTable})
		backends := &nftables.Set{
			Table: t, Name: "backends", IsMap: true, Constant: true,
			KeyType: nftables.TypeInteger, DataType: nftables.TypeIPAddr,
			KeyByteOrder: binaryutil.NativeEndian,
		}
		var elems []nftables.SetElement
		for i, a := range f.Backends {
			elems = append(elems, nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(uint32(i)), Val: a.AsSlice()})
		}
		if err := c.AddSet(backends, elems); err != nil {
			return err
		}
		pre := c.AddChain(baseChain(t, "prerouting", nftables.ChainTypeNAT, nftables.ChainHookPrerouting, -100))
		dnat := []expr.Any{
			&expr.Numgen{Register: 1, Modulus: uint32(len(f.Backends)), Type: unix.NFT_NG_RANDOM},
			&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: backends.Name, SetID: backends.ID},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1},
		}
		toVIP := rule(ipIn(false, prefix32(f.VIP)), isTCP())
		if len(f.Spec.LBPorts) == 0 {
			c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: rule(toVIP, dnat)})
		}
		for _, port := range f.Spec.LBPorts {
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
			&expr.Immediate{Register: 1, Data: f.LBSource.AsSlice()},
			&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1},
		}})
		return nil
	})
}
