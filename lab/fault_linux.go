package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// faultTable holds every fault in a namespace; Clear deletes it.
const faultTable = "prober_fault"

// ctMarkSeen marks connections the LB saw begin while lb-forget is on.
const ctMarkSeen = 1

// Inject checks ft and installs it. Faults compose: each Inject adds its
// own chains to the device's prober_fault table, and Clear removes them
// all.
func (f *Fabric) Inject(ctx context.Context, ft Fault) error {
	if err := f.Check(ft); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ns := func(device string) string { return nsName(f.Spec.Prefix, device) }
	d := f.dropper(ft)
	var err error
	switch ft.Kind {
	case FaultDeviceLoss:
		err = d.install(ns(ft.Device), ft.Kind, hookRules{forward: d.random(nil)})
	case FaultLinkLoss:
		err = d.install(ns(ft.From), ft.Kind, hookRules{forward: d.random(oifIs(ft.To))})
		if err == nil && ft.Both {
			err = d.install(ns(ft.To), ft.Kind, hookRules{forward: d.random(oifIs(ft.From))})
		}
	case FaultMTUBlackhole:
		drop := func(to string) [][]expr.Any {
			return [][]expr.Any{rule(d.only, oifIs(to), longerThan(ft.MTU), []expr.Any{verdictDrop()})}
		}
		err = d.install(ns(ft.From), ft.Kind, hookRules{forward: drop(ft.To)})
		if err == nil && ft.Both {
			err = d.install(ns(ft.To), ft.Kind, hookRules{forward: drop(ft.From)})
		}
	case FaultMTU:
		err = setMTU(ns(ft.From), ft.MTU, ft.To)
		if err == nil {
			err = setMTU(ns(ft.To), ft.MTU, ft.From)
		}
	case FaultBlackhole:
		var rules [][]expr.Any
		for _, fam := range d.fams {
			rules = append(rules, rule(nfproto(fam), isTCP(), flowHashIsZero(fam, ft.Mod), []expr.Any{verdictDrop()}))
		}
		err = d.install(ns(ft.Device), ft.Kind, hookRules{forward: rules})
	case FaultLBForget:
		err = d.install(ns(KindLB), ft.Kind, lbForget(d.only))
	case FaultLBLoss:
		err = d.install(ns(KindLB), ft.Kind, hookRules{prerouting: d.random(nil)})
	case FaultPodNodeLoss:
		err = f.podNodeLoss(d)
	case FaultHostNIC:
		h, _ := f.Host(ft.Host)
		err = d.install(h.Namespace, ft.Kind, hookRules{
			input:   d.random(iifIs(hostIf)),
			output:  d.random(oifIs(hostIf)),
			forward: append(d.random(iifIs(hostIf)), d.random(oifIs(hostIf))...),
		})
	case FaultPartition:
		err = f.partition(ctx, ft, d)
	case FaultDelay:
		err = f.injectDelay(ft, d)
	case FaultPortLoss:
		h, _ := f.Host(ft.Host)
		var rules [][]expr.Any
		for _, fam := range d.fams {
			match := rule(nfproto(fam), l4protoIs(ft.Proto), dportIs(uint16(ft.Port)))
			if a, err := netip.ParseAddr(ft.Addr); err == nil {
				if a.Is4() != (fam.name == FamilyIPv4) {
					continue
				}
				match = rule(match, ipIn(false, netip.PrefixFrom(a, a.BitLen())))
			}
			rules = append(rules, rule(match, randomBelow(d.permille), []expr.Any{verdictDrop()}))
		}
		err = d.install(h.Namespace, ft.Kind, hookRules{input: rules, forward: rules, output: rules})
	}
	if err != nil {
		return fmt.Errorf("fault %s: %w", ft, err)
	}
	f.logger.Info("lab fault injected", "prefix", f.Spec.Prefix, "fault", ft.String())
	return nil
}

// dropper builds one fault's rules for the families it breaks.
type dropper struct {
	fams []*family // the families whose addresses a rule may match
	// only restricts a rule that matches no address to the fault's
	// family: empty when the fault breaks both.
	only     []expr.Any
	permille int
	ndp      bool // the fault breaks IPv6: spare neighbor discovery
}

func (f *Fabric) dropper(ft Fault) dropper {
	d := dropper{permille: ft.Permille}
	for _, fam := range familiesOf(f.Spec) {
		if ft.Family == "" || ft.Family == fam.name {
			d.fams = append(d.fams, fam)
		}
	}
	if ft.Family != "" {
		d.only = nfproto(d.fams[0])
	}
	d.ndp = slices.Contains(d.fams, ipv6)
	return d
}

// random is the rule that drops permille of the packets match matches
// (nil: all) in the fault's families.
func (d dropper) random(match []expr.Any) [][]expr.Any {
	return [][]expr.Any{rule(d.only, match, randomBelow(d.permille), []expr.Any{verdictDrop()})}
}

// install adds the fault's chains to namespace ns. A fault that breaks
// IPv6 accepts neighbor discovery first in every chain: the lab's faults
// drop data, not the neighbor tables under it, as they leave ARP alone
// (inet chains never see ARP). A lossy host NIC, LB or pod-to-node path
// then loses packets, not the addresses to send them to.
func (d dropper) install(ns, kind string, hr hookRules) error {
	_, err := d.installChains(ns, kind, hr)
	return err
}

// installChains is install that returns the names of the chains it added.
func (d dropper) installChains(ns, kind string, hr hookRules) ([]string, error) {
	if d.ndp {
		for _, rules := range []*[][]expr.Any{&hr.prerouting, &hr.input, &hr.forward, &hr.output} {
			if len(*rules) > 0 {
				*rules = append([][]expr.Any{ndpAccept()}, *rules...)
			}
		}
	}
	return addFault(ns, kind, hr)
}

// lbForget's rules, at priority -150: after conntrack (-200) has
// attached the connection, before DNAT (-100). At -200 itself the chain
// may run before conntrack and sees no ct state (lab-facts.md). A bare
// SYN opens a flow at an LB that forgot the old one, even when conntrack
// still holds the 5-tuple half-open (a probe that died past the LB
// leaves it in SYN_SENT for 2 minutes): it marks the connection too, or
// its SYN-ACK would be dropped on the way back.
func lbForget(only []expr.Any) hookRules {
	mark := []expr.Any{
		&expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(ctMarkSeen)},
		&expr.Ct{Register: 1, SourceRegister: true, Key: expr.CtKeyMARK},
	}
	return hookRules{prerouting: [][]expr.Any{
		rule(only, ctStateNew(), mark),
		rule(only, isTCP(), tcpBareSYN(), mark),
		rule(only, []expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeyMARK},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(ctMarkSeen)},
			verdictDrop(),
		}),
	}, prio: -150}
}

// podNodeLoss drops, at every node's input, permille of the packets from
// any rack's pods.
func (f *Fabric) podNodeLoss(d dropper) error {
	var rules [][]expr.Any
	for _, fam := range d.fams {
		for r := 1; r <= f.Spec.Racks; r++ {
			rules = append(rules, rule(nfproto(fam), ipIn(true, fam.rackPods(r)), randomBelow(d.permille), []expr.Any{verdictDrop()}))
		}
	}
	for _, n := range f.Nodes() {
		if err := d.install(n.Namespace, FaultPodNodeLoss, hookRules{input: rules}); err != nil {
			return err
		}
	}
	return nil
}

// tcp flags & (syn | ack) == syn
func tcpBareSYN() []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{tcpSYN | tcpACK}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{tcpSYN}},
	}
}

// TCP header flag bits (RFC 9293 §3.1), in the byte at offset 13.
const (
	tcpSYN = 0x02
	tcpACK = 0x10
)

// ct state new
func ctStateNew() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitNEW), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

// partition drops, at every ToR of the rack or zone, everything from or
// to the other racks' prefixes and the LB's.
func (f *Fabric) partition(ctx context.Context, ft Fault, d dropper) error {
	inside := f.torsOf(ft.Rack, ft.Zone)
	var rules [][]expr.Any
	for _, fam := range d.fams {
		var outside []netip.Prefix
		for r := 1; r <= f.Spec.Racks; r++ {
			if !slices.Contains(inside, r) {
				outside = append(outside, fam.rackPrefixes(r)...)
			}
		}
		if f.Spec.LB {
			outside = append(outside, fam.lbNet)
		}
		for _, p := range outside {
			rules = append(rules,
				rule(nfproto(fam), ipIn(true, p), []expr.Any{verdictDrop()}),
				rule(nfproto(fam), ipIn(false, p), []expr.Any{verdictDrop()}))
		}
	}
	for _, r := range inside {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := d.install(nsName(f.Spec.Prefix, torName(r)), ft.Kind, hookRules{forward: rules}); err != nil {
			return err
		}
	}
	return nil
}

// hookRules are one fault's rules per hook; each non-empty hook gets a
// base chain of its own (filter type, priority prio or 0).
type hookRules struct {
	prerouting, input, forward, output [][]expr.Any
	prio                               nftables.ChainPriority
}

// addFault adds hr's chains to ns's prober_fault table and returns their
// names.
func addFault(ns, kind string, hr hookRules) ([]string, error) {
	var names []string
	err := nftIn(ns, func(c *nftables.Conn) error {
		t := &nftables.Table{Family: nftables.TableFamilyINet, Name: faultTable}
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
		if err != nil {
			return fmt.Errorf("nftables: list chains: %w", err)
		}
		n := 1 + len(slices.DeleteFunc(chains, func(ch *nftables.Chain) bool { return ch.Table.Name != faultTable }))
		c.AddTable(t)
		for _, h := range []struct {
			name  string
			hook  *nftables.ChainHook
			rules [][]expr.Any
		}{
			{"prerouting", nftables.ChainHookPrerouting, hr.prerouting},
			{"input", nftables.ChainHookInput, hr.input},
			{"forward", nftables.ChainHookForward, hr.forward},
			{"output", nftables.ChainHookOutput, hr.output},
		} {
			if len(h.rules) == 0 {
				continue
			}
			ch := c.AddChain(baseChain(t, fmt.Sprintf("%s-%d-%s", kind, n, h.name), nftables.ChainTypeFilter, h.hook, hr.prio))
			names = append(names, ch.Name)
			n++
			for _, r := range h.rules {
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: r})
			}
		}
		return nil
	})
	return names, err
}

// Clear removes every fault from every namespace of the lab, also from
// namespaces the inventory does not list. It first stops the delays this
// process holds in the lab, which let their packets go; another
// process's delays end when they see their chains gone.
func (f *Fabric) Clear(ctx context.Context) error {
	f.stopDelays()
	names, err := listNS(f.Spec.Prefix)
	if err != nil {
		return fmt.Errorf("lab %s: clear: %w", f.Spec.Prefix, err)
	}
	var errs []error
	for _, ns := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := nftIn(ns, func(c *nftables.Conn) error {
			tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
			if err != nil {
				return fmt.Errorf("nftables: list tables: %w", err)
			}
			for _, t := range tables {
				if t.Name == faultTable {
					c.DelTable(t)
				}
			}
			return nil
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	// An mtu fault's links back at LinkMTU: the routers' links are never
	// set otherwise.
	for _, r := range f.Routers {
		ns := nsName(f.Spec.Prefix, r.Name)
		var links []string
		for _, i := range r.Interfaces {
			if _, ok := f.Router(i.Peer); ok {
				links = append(links, i.Name)
			}
		}
		if len(links) == 0 || !slices.Contains(names, ns) {
			continue
		}
		if err := setMTU(ns, LinkMTU, links...); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab %s: clear: %w", f.Spec.Prefix, err)
	}
	f.logger.Info("lab faults cleared", "prefix", f.Spec.Prefix)
	return nil
}

// setMTU sets the MTU of interfaces devs in namespace ns; one already at
// mtu is left alone.
func setMTU(ns string, mtu int, devs ...string) error {
	fd, err := netns.GetFromName(ns)
	if err != nil {
		return fmt.Errorf("netns %s: %w", ns, err)
	}
	defer fd.Close()
	h, err := netlink.NewHandleAt(fd)
	if err != nil {
		return fmt.Errorf("netns %s: netlink: %w", ns, err)
	}
	defer h.Close()
	for _, dev := range devs {
		l, err := h.LinkByName(dev)
		if err != nil {
			return fmt.Errorf("netns %s: %s: %w", ns, dev, err)
		}
		if l.Attrs().MTU == mtu {
			continue
		}
		if err := h.LinkSetMTU(l, mtu); err != nil {
			return fmt.Errorf("netns %s: %s mtu %d: %w", ns, dev, mtu, err)
		}
	}
	return nil
}
