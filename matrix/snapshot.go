package matrix

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/netprober/prober/api"
)

// Snapshot computes the matrix from the reports that are fresh at now.
// Stale agents are listed but contribute no cell: no data is not loss.
func (m *Matrix) Snapshot(now time.Time) Snapshot {
	fresh, stale := m.fresh(now)
	s := Snapshot{Time: now, GroupBy: m.cfg.GroupBy, Agents: []AgentStatus{}, Groups: []Cell{}, Worst: []Cell{}}
	racks := m.groupRacks(fresh)
	for _, a := range fresh {
		s.Agents = append(s.Agents, AgentStatus{Name: a.name, Group: m.agentGroup(a, racks), State: StateFresh, LastSeen: a.seen})
	}
	for _, a := range stale {
		s.Agents = append(s.Agents, AgentStatus{Name: a.name, Group: a.group, State: StateStale, LastSeen: a.seen})
	}
	slices.SortFunc(s.Agents, func(x, y AgentStatus) int { return strings.Compare(x.Name, y.Name) })

	type key struct{ src, dst, path, proto, family string }
	type acc struct {
		Cell
		rttWeight float64
	}
	groups := map[key]*acc{}
	var pairs []Cell
	for _, a := range fresh {
		for ti := range a.targets {
			t := &a.targets[ti]
			dstGroup := m.targetGroup(t, racks)
			srcGroup := cmp.Or(m.agentGroup(a, racks), "unknown")
			for pi := t.protoStart; pi < t.protoEnd; pi++ {
				p := &a.protos[pi]
				c := Cell{
					Source: a.name, Target: t.name, Path: t.path, Protocol: p.protocol, Family: t.family,
					Sent: p.stats.Sent, Lost: p.stats.Lost, LossRatio: p.stats.LossRatio,
					RTTP50: p.stats.RTTP50, RTTP99: p.stats.RTTP99, PathMTU: p.stats.PathMTU,
				}
				if p.notAnswering {
					c.NotAnswering = 1
				}
				pairs = append(pairs, c)
				k := key{srcGroup, dstGroup, t.path, p.protocol, t.family}
				g := groups[k]
				if g == nil {
					g = &acc{Cell: Cell{Source: k.src, Target: k.dst, Path: k.path, Protocol: k.proto, Family: k.family}}
					groups[k] = g
				}
				g.Sent += c.Sent
				g.Lost += c.Lost
				g.NotAnswering += c.NotAnswering
				g.PathMTU = api.MinPathMTU(g.PathMTU, c.PathMTU)
				if w := float64(c.Sent - c.Lost); w > 0 && c.RTTP50 > 0 {
					g.RTTP50 += w * c.RTTP50
					g.rttWeight += w
				}
				g.RTTP99 = max(g.RTTP99, c.RTTP99)
			}
		}
	}
	for _, g := range groups {
		if g.rttWeight > 0 {
			g.RTTP50 /= g.rttWeight
		}
		if g.Sent > 0 {
			g.LossRatio = float64(g.Lost) / float64(g.Sent)
		}
		s.Groups = append(s.Groups, g.Cell)
	}
	slices.SortFunc(s.Groups, compareCells)

	if m.cfg.Cells {
		s.Cells = slices.Clone(pairs)
		slices.SortFunc(s.Cells, compareCells)
	}
	worst := make([]Cell, 0, len(pairs))
	for _, c := range pairs {
		if c.Lost > 0 {
			worst = append(worst, c)
		}
	}
	slices.SortFunc(worst, func(x, y Cell) int {
		if c := cmp.Compare(wilsonLower(y.Lost, y.Sent), wilsonLower(x.Lost, x.Sent)); c != 0 {
			return c
		}
		return compareCells(x, y)
	})
	if len(worst) > m.cfg.K {
		worst = worst[:m.cfg.K]
	}
	s.Worst = append(s.Worst, worst...)
	return s
}

// targetGroup prefers what the target's own agent says about its group
// over the prober's view of the target; with GroupBy rack and no label,
// its rack from racks (hostRacks: inferred from first hops).
func (m *Matrix) targetGroup(t *targetRec, racks map[string]string) string {
	if a := m.agents[t.name]; a != nil && a.group != "" {
		return a.group
	}
	return cmp.Or(t.group, racks[t.name], "unknown")
}

func compareCells(x, y Cell) int {
	return cmp.Or(
		strings.Compare(x.Source, y.Source),
		strings.Compare(x.Target, y.Target),
		strings.Compare(x.Path, y.Path),
		strings.Compare(x.Protocol, y.Protocol),
		strings.Compare(x.Family, y.Family),
	)
}

// wilsonLower is the lower bound of the 95 % Wilson score interval of the
// loss ratio lost/sent.
func wilsonLower(lost, sent uint64) float64 {
	if sent == 0 {
		return 0
	}
	const z = 1.959964
	n := float64(sent)
	p := float64(lost) / n
	d := 1 + z*z/n
	c := p + z*z/(2*n)
	r := z * math.Sqrt(p*(1-p)/n+z*z/(4*n*n))
	return max(0, (c-r)/d)
}
