package agent

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/netprober/prober/api"
)

// firstHopPeriod is how often the agent rechecks its first hop besides
// when its targets change: a node changes ToR only when it is recabled or
// its routes are, and a pass costs a route lookup per sampled target.
const firstHopPeriod = time.Minute

// firstHopSample bounds the route lookups of one pass: at 5,000 nodes an
// agent has ~160 targets, and a few dozen routes say as much as all.
const firstHopSample = 64

// routeLookup returns the gateway of the route from src to each of dsts
// (invalid when the route has none: on-link, or no route) and of the
// default route (invalid when there is none). firstHopRoutes is the
// system's; tests stub it.
type routeLookup func(src netip.Addr, dsts []netip.Addr) (gws []netip.Addr, dflt netip.Addr, err error)

// firstHop is the first-hop router that gws, the gateways of the routes
// to the agent's targets, agree on most (ties: the lowest address, so
// every pass over the same routes says the same), else the default
// route's gateway dflt, else invalid. In a routed leaf-spine a node's
// routes to other racks all go via its ToR and to its rack-mates on-link
// (no gateway); a pod's all go via its node. A link-local gateway (IPv6
// routes usually have one; Calico gives every pod 169.254.1.1) names no
// router beyond its link: every ToR may be fe80::1, so it says nothing.
func firstHop(gws []netip.Addr, dflt netip.Addr) netip.Addr {
	var best netip.Addr
	bestN := 0
	sorted := slices.SortedFunc(slices.Values(gws), netip.Addr.Compare)
	for i := 0; i < len(sorted); {
		j := i
		for j < len(sorted) && sorted[j] == sorted[i] {
			j++
		}
		if named(sorted[i]) && j-i > bestN {
			best, bestN = sorted[i], j-i
		}
		i = j
	}
	if best.IsValid() {
		return best
	}
	if named(dflt) {
		return dflt
	}
	return netip.Addr{}
}

// named reports whether gw can name a first-hop router.
func named(gw netip.Addr) bool { return gw.IsValid() && !gw.IsLinkLocalUnicast() }

// firstHopTargets are the addresses whose routes say where the first hop
// is: the node targets' when there are any (a VIP may be routed apart, a
// rack-mate may be the gateway of its own pods' routes), else every
// target's; at most firstHopSample, spread over the targets by name.
func firstHopTargets(ts map[targetKey]*target, family string) []netip.Addr {
	var nodes, all []*target
	for _, t := range ts {
		if t.Family() != family {
			continue // routes of the source's own family say its first hop
		}
		all = append(all, t)
		if t.Class == api.ClassNode {
			nodes = append(nodes, t)
		}
	}
	if len(nodes) == 0 {
		nodes = all
	}
	slices.SortFunc(nodes, func(x, y *target) int { return strings.Compare(x.Name, y.Name) })
	n := min(len(nodes), firstHopSample)
	out := make([]netip.Addr, 0, n)
	for i := range n {
		out = append(out, nodes[i*len(nodes)/n].Addr)
	}
	return out
}

// runFirstHop keeps the agent's first hop (and host addresses) current: at once, when the
// targets change (SetTargets kicks it) and every firstHopPeriod, until
// ctx is cancelled. Where the system cannot say (not Linux), it stops
// after the first pass and the agent reports no first hop.
func (a *Agent) runFirstHop(ctx context.Context) error {
	t := time.NewTicker(firstHopPeriod)
	defer t.Stop()
	var lastErr string
	for {
		err := a.updateFirstHop()
		if errors.Is(err, errors.ErrUnsupported) {
			return nil
		}
		// One line per new failure, not one a minute.
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != "" && msg != lastErr {
			a.log.Warn("first hop lookup", "err", err)
		}
		lastErr = msg
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-a.hopKick:
		}
	}
}

// updateFirstHop looks the first hop up once, and a node agent's host
// addresses, and keeps them for Observations.
func (a *Agent) updateFirstHop() error {
	a.updateHostAddrs()
	a.mu.Lock()
	dsts := firstHopTargets(a.targets, api.FamilyOf(a.src))
	a.mu.Unlock()
	gws, dflt, err := a.routes(a.src, dsts)
	if err != nil {
		return err
	}
	hop := firstHop(gws, dflt)
	a.mu.Lock()
	old := a.firstHop
	a.firstHop = hop
	a.mu.Unlock()
	if hop != old {
		a.log.Info("first hop", "first_hop", addrString(hop), "routes", len(dsts))
	}
	return nil
}

// kickFirstHop asks runFirstHop for a pass soon; kicks coalesce.
func (a *Agent) kickFirstHop() {
	select {
	case a.hopKick <- struct{}{}:
	default:
	}
}

// addrString is a's text, "" for the invalid address (unknown).
func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
