package matrix

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/netprober/prober/api"
)

// splitAlpha is the p-value below which the flows through a suspect are
// two populations, not one. One source's flows leave elements the
// estimator cannot tell apart (a first hop every flow crosses, when
// nothing past it answered): such an element is named, with the loss of
// all its flows averaged, though some of them lost nothing at all.
const splitAlpha = 1e-3

// LocalizeFlows runs Localize over the flows one source traced to one
// target: src is the tracing host, t the target with one protocol whose
// Flows carry their paths (the destination last when reached, "" for a
// hop nobody heard). Names and thresholds come from cfg, as in the matrix
// process. A suspect whose flows split into clean and lossy is dropped
// (splitAlpha); if flows lost packets and nothing is left, Unlocated says
// past which hop. lossy
// says whether a flow's end-to-end counts are beyond noise, by the
// caller's bar.
func LocalizeFlows(cfg Config, src api.Agent, t api.Target, lossy func(api.Stats) bool, now time.Time) (FlowsVerdict, error) {
	if len(t.Protocols) != 1 {
		return FlowsVerdict{}, errors.New("localize flows: want one protocol")
	}
	m, err := New(cfg)
	if err != nil {
		return FlowsVerdict{}, err
	}
	obs := api.Observations{SchemaVersion: api.SchemaVersion, Agent: src, Time: now, Targets: []api.Target{t}}
	if err := m.Observe(now, obs); err != nil {
		return FlowsVerdict{}, fmt.Errorf("localize flows: %w", err)
	}
	d := m.Localize(now)
	flows := t.Protocols[0].Flows
	names := make([][]string, len(flows))
	for i := range flows {
		names[i] = m.hopNames(src, t, &flows[i])
	}
	var v FlowsVerdict
	for _, s := range d.Suspects {
		fs := FlowSuspect{Suspect: s}
		var crossing []*api.Flow
		for i := range flows {
			f := &flows[i]
			through, known := crosses(s, names[i])
			if !through && !known {
				fs.Unknown = append(fs.Unknown, f.SourcePort)
				continue
			}
			if !through {
				fs.AvoidSent += f.Sent
				fs.AvoidLost += f.Lost
				continue
			}
			crossing = append(crossing, f)
			fs.Through = append(fs.Through, f.SourcePort)
			fs.Sent += f.Sent
			fs.Lost += f.Lost
			if lossy(f.Stats) {
				fs.Lossy = append(fs.Lossy, f.SourcePort)
			}
		}
		if len(fs.Lossy) == 0 || splitP(crossing) < splitAlpha {
			continue
		}
		v.Suspects = append(v.Suspects, fs)
	}
	if len(v.Suspects) == 0 {
		v.Unlocated = unlocated(flows, t.Address, lossy)
	}
	return v, nil
}

// hopNames names flow f's path from src to t as Localize names its
// devices: src first, "" for a hop nobody heard; nil for an untraced flow.
func (m *Matrix) hopNames(src api.Agent, t api.Target, f *api.Flow) []string {
	if f.Path == nil {
		return nil
	}
	names := make([]string, 0, len(f.Path.Hops)+1)
	names = append(names, src.Name)
	for i, h := range f.Path.Hops {
		switch {
		case h == "":
			names = append(names, "")
		case i == len(f.Path.Hops)-1 && h == t.Address:
			names = append(names, t.Name)
		default:
			names = append(names, cmp.Or(m.deviceOfAddr(h), h))
		}
	}
	return names
}

// crosses says whether the flow whose path hopNames gave crosses suspect
// s; known is false when it does not but a silent hop could be s (or the
// flow was not traced).
func crosses(s Suspect, names []string) (through, known bool) {
	if names == nil {
		return false, false
	}
	if s.Kind == KindLink {
		from, to, ok := strings.Cut(s.Name, "->")
		if !ok {
			return false, true
		}
		for i := 1; i < len(names); i++ {
			if names[i-1] == from && names[i] == to {
				return true, true
			}
		}
	} else if slices.Contains(names, s.Name) {
		return true, true
	}
	return false, !slices.Contains(names, "")
}

// splitP is the chance that flows sharing one loss ratio would split as
// unevenly as these: the least, over the flows sorted by loss, of the
// chance that the first j lose no more than they did at the pooled ratio,
// times the number of splits tried. A suspect whose flows split so is
// not one element dropping its share of every flow's packets.
func splitP(flows []*api.Flow) float64 {
	if len(flows) < 2 {
		return 1
	}
	sorted := slices.Clone(flows)
	slices.SortFunc(sorted, func(a, b *api.Flow) int {
		// a.Lost/a.Sent against b.Lost/b.Sent, in integers.
		return cmpU64(a.Lost*b.Sent, b.Lost*a.Sent)
	})
	var sent, lost float64
	for _, f := range sorted {
		sent += float64(f.Sent)
		lost += float64(f.Lost)
	}
	if sent == 0 {
		return 1
	}
	pooled := lost / sent
	best := 1.0
	var lowSent, lowLost float64
	for _, f := range sorted[:len(sorted)-1] {
		lowSent += float64(f.Sent)
		lowLost += float64(f.Lost)
		// P(X <= lowLost) for X ~ Binomial(lowSent, pooled).
		best = min(best, upperTail(lowSent-lowLost, lowSent, 1-pooled))
	}
	return min(1, best*float64(len(sorted)-1))
}

// unlocated describes the loss no suspect explains, or nil when no flow
// lost packets. Past is the deepest hop where every lossy flow that
// answered there answered alike, and every hop before it too; a silent
// hop agrees with anything (routers rate-limit their answers).
func unlocated(flows []api.Flow, dst string, lossy func(api.Stats) bool) *Unlocated {
	var u Unlocated
	var paths [][]string
	for i := range flows {
		f := &flows[i]
		if !lossy(f.Stats) {
			u.Clean++
			continue
		}
		u.Lossy = append(u.Lossy, f.SourcePort)
		u.Sent += f.Sent
		u.Lost += f.Lost
		if f.Path != nil {
			paths = append(paths, f.Path.Hops)
		}
	}
	if len(u.Lossy) == 0 {
		return nil
	}
	for ttl := 0; ; ttl++ {
		at := ""
		for _, p := range paths {
			if ttl >= len(p) || p[ttl] == "" {
				continue
			}
			if at != "" && p[ttl] != at {
				return &u
			}
			at = p[ttl]
		}
		if at == "" || at == dst {
			return &u
		}
		u.Past, u.PastTTL = at, ttl+1
	}
}
