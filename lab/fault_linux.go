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
	var err error
	switch ft.Kind {
	case FaultDeviceLoss:
		err = addFault(ns(ft.Device), ft.Kind, hookRules{forward: [][]expr.Any{rule(randomBelow(ft.Permille), []expr.Any{drop()})}})
	case FaultLinkLoss:
		err = addFault(ns(ft.From), ft.Kind, linkLoss(ft.To, ft.Permille))
		if err == nil && ft.Both {
			err = addFault(ns(ft.To), ft.Kind, linkLoss(ft.From, ft.Permille))
		}
	case FaultBlackhole:
		err = addFault(ns(ft.Device), ft.Kind, hookRules{forward: [][]expr.Any{
			rule(isIPv4(), isTCP(), flowHashIsZero(ft.Mod), []expr.Any{drop()}),
		}})
	case FaultLBForget:
		// At priority -150: after conntrack (-200) has attached the
		// connection, before DNAT (-100). At -200 itself the chain may run
		// before conntrack and sees no ct state (lab-facts.md). A bare
		// SYN opens a flow at an LB that forgot the old one, even when
		// conntrack still holds the 5-tuple half-open (a probe that died
		// past the LB leaves it in SYN_SENT for 2 minutes): it marks the
		// connection too, or its SYN-ACK would be dropped on the way back.
		mark := []expr.Any{
			&expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(ctMarkSeen)},
			&expr.Ct{Register: 1, SourceRegister: true, Key: expr.CtKeyMARK},
		}
		err = addFault(ns(KindLB), ft.Kind, hookRules{prerouting: [][]expr.Any{
			rule(ctStateNew(), mark),
			rule(isTCP(), tcpBareSYN(), mark),
			{
				&expr.Ct{Register: 1, Key: expr.CtKeyMARK},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(ctMarkSeen)},
				drop(),
			},
		}, prio: -150})
	case FaultLBLoss:
		err = addFault(ns(KindLB), ft.Kind, hookRules{prerouting: [][]expr.Any{rule(randomBelow(ft.Permille), []expr.Any{drop()})}})
	case FaultPodNodeLoss:
		var rules [][]expr.Any
		for r := 1; r <= f.Spec.Racks; r++ {
			rules = append(rules, rule(isIPv4(), ipIn(true, rackPodNet(r)), randomBelow(ft.Permille), []expr.Any{drop()}))
		}
		for _, n := range f.Nodes() {
			if err = addFault(n.Namespace, ft.Kind, hookRules{input: rules}); err != nil {
				break
			}
		}
	case FaultHostNIC:
		h, _ := f.Host(ft.Host)
		loss := func(m []expr.Any) []expr.Any { return rule(m, randomBelow(ft.Permille), []expr.Any{drop()}) }
		err = addFault(h.Namespace, ft.Kind, hookRules{
			input:   [][]expr.Any{loss(iifIs(hostIf))},
			output:  [][]expr.Any{loss(oifIs(hostIf))},
			forward: [][]expr.Any{loss(iifIs(hostIf)), loss(oifIs(hostIf))},
		})
	case FaultPartition:
		err = f.partition(ctx, ft)
	}
	if err != nil {
		return fmt.Errorf("fault %s: %w", ft, err)
	}
	f.logger.Info("lab fault injected", "prefix", f.Spec.Prefix, "fault", ft.String())
	return nil
}

func linkLoss(peer string, permille int) hookRules {
	return hookRules{forward: [][]expr.Any{rule(oifIs(peer), randomBelow(permille), []expr.Any{drop()})}}
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
func (f *Fabric) partition(ctx context.Context, ft Fault) error {
	inside := f.torsOf(ft.Rack, ft.Zone)
	var outside []netip.Prefix
	for r := 1; r <= f.Spec.Racks; r++ {
		if !slices.Contains(inside, r) {
			outside = append(outside, rackPrefixes(r)...)
		}
	}
	if f.Spec.LB {
		outside = append(outside, lbNet)
	}
	var rules [][]expr.Any
	for _, p := range outside {
		rules = append(rules,
			rule(isIPv4(), ipIn(true, p), []expr.Any{drop()}),
			rule(isIPv4(), ipIn(false, p), []expr.Any{drop()}))
	}
	for _, r := range inside {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := addFault(nsName(f.Spec.Prefix, torName(r)), ft.Kind, hookRules{forward: rules}); err != nil {
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

func addFault(ns, kind string, hr hookRules) error {
	return nftIn(ns, func(c *nftables.Conn) error {
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
			n++
			for _, r := range h.rules {
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: r})
			}
		}
		return nil
	})
}

// Clear removes every fault from every namespace of the lab, also from
// namespaces the inventory does not list.
func (f *Fabric) Clear(ctx context.Context) error {
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
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab %s: clear: %w", f.Spec.Prefix, err)
	}
	f.logger.Info("lab faults cleared", "prefix", f.Spec.Prefix)
	return nil
}
