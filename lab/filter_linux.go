package lab

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// filterTable holds the network's own ICMP filtering (Spec.DropEcho,
// Spec.SilentRouters): part of the network, not a fault, so Clear keeps
// it.
const filterTable = "prober_filter"

// ICMP types the filters match.
const (
	icmpEchoRequest   = 8
	icmpTimeExceeded  = 11
	icmp6EchoRequest  = 128
	icmp6TimeExceeded = 3
)

// filters installs the spec's ICMP filtering once the fabric is built:
// nodes that drop echo requests in their input hook (a host firewall, a
// security group), routers that send no time exceeded from their output
// hook (a cloud VPC's): a trace then sees the target and nothing between.
func (b *builder) filters() error {
	spec := b.plan.fabric.Spec
	if spec.DropEcho {
		for _, h := range b.plan.fabric.Hosts {
			if h.Class != ClassNode {
				continue
			}
			if err := addFilter(h.Namespace, nftables.ChainHookInput, icmpEchoRequest, icmp6EchoRequest); err != nil {
				return err
			}
		}
	}
	if spec.Overlay {
		for _, h := range b.plan.fabric.Hosts {
			if h.Class == ClassNode {
				if err := masqueradePods(h.Namespace, familiesOf(spec)); err != nil {
					return err
				}
			}
		}
	}
	if spec.SilentRouters {
		for _, r := range b.plan.fabric.Routers {
			if !isSwitch(r.Kind) {
				continue
			}
			if err := silence(r.Namespace); err != nil {
				return err
			}
		}
	}
	return nil
}

// Silence makes router (a spine, ToR or the LB) send no ICMP time
// exceeded from now on, as Spec.SilentRouters makes every ToR and spine:
// a switch whose control plane polices them all away. Like those, it is
// the network, not a fault: Clear keeps it.
func (f *Fabric) Silence(router string) error {
	if !slices.ContainsFunc(f.Routers, func(r Router) bool { return r.Name == router }) {
		return fmt.Errorf("lab %s: silence: no router %q", f.Spec.Prefix, router)
	}
	return silence(nsName(f.Spec.Prefix, router))
}

func silence(ns string) error {
	return addFilter(ns, nftables.ChainHookOutput, icmpTimeExceeded, icmp6TimeExceeded)
}

// addFilter drops, in hook, ICMP of type v4 and ICMPv6 of type v6:
// meta l4proto icmp icmp type V4 drop; meta l4proto ipv6-icmp icmpv6 type V6 drop.
func addFilter(ns string, hook *nftables.ChainHook, v4, v6 byte) error {
	return nftIn(ns, func(c *nftables.Conn) error {
		t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: filterTable})
		ch := c.AddChain(baseChain(t, "icmp", nftables.ChainTypeFilter, hook, 0))
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: icmpTypeDrop(unix.IPPROTO_ICMP, v4)})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: icmpTypeDrop(unix.IPPROTO_ICMPV6, v6)})
		return nil
	})
}

// meta l4proto PROTO; @th,0,8 == typ; drop
func icmpTypeDrop(proto, typ byte) []expr.Any {
	return rule(metaIs(expr.MetaKeyL4PROTO, []byte{proto}), []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{typ}},
		verdictDrop(),
	})
}

// masqueradePods makes a node on the overlay SNAT its pods' packets to the
// LB's and the control plane's networks to its own address, as flannel's
// ip-masq does for what leaves the pod network: the underlay routes no
// pod address, so those leaves could not answer a pod. Pods reach nodes
// and pods unmasqueraded.
//
//	table inet prober_filter { chain masq { type nat hook postrouting priority 100;
//	  ip saddr PodRange ip daddr { LBNet, CPNet } masquerade } }
func masqueradePods(ns string, fams []*family) error {
	return nftIn(ns, func(c *nftables.Conn) error {
		t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: filterTable})
		ch := c.AddChain(baseChain(t, "masq", nftables.ChainTypeNAT, nftables.ChainHookPostrouting, *nftables.ChainPriorityNATSource))
		for _, fam := range fams {
			for _, leaf := range []netip.Prefix{fam.lbNet, fam.cpNet} {
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: rule(nfproto(fam), ipIn(true, fam.podRange), ipIn(false, leaf), []expr.Any{&expr.Masq{}})})
			}
		}
		return nil
	})
}
