package matrix

import (
	"slices"
	"strings"
	"time"

	"github.com/netprober/prober/api"
)

// Localize names what drops packets, from the reports fresh at now, and
// remembers since when each suspect has been suspected: call it once per
// round.
//
// A dual-stack cluster is localized once per address family: the two
// families may take different paths (a ToR's IPv6 ECMP hash) or meet
// different rules (an IPv6 ACL), so one family's clean flows must not
// acquit a device the other's flows blame. A suspect listed in one
// family only is named with that family.
func (m *Matrix) Localize(now time.Time) Diagnosis {
	fresh, _ := m.fresh(now)
	var suspects []Suspect
	var disputed []Dispute
	if fams := familiesOf(fresh); len(fams) <= 1 {
		m.loc.s.spread = replySpread(fams)
		suspects, disputed, m.fabric = m.localize(fresh)
	} else {
		byFam := make([][]Suspect, len(fams))
		fabrics := make([]Fabric, len(fams))
		for i, f := range fams {
			m.loc.s.spread = replySpread(fams[i : i+1])
			var ds []Dispute
			byFam[i], ds, fabrics[i] = m.localize(familyView(fresh, f))
			for _, d := range ds {
				d.Family = f
				disputed = append(disputed, d)
			}
		}
		suspects, m.fabric = mergeFamilies(fams, byFam), mergeFabrics(fabrics)
	}
	markSuspects(&m.fabric, now, suspects)
	m.remember(now, suspects)
	return Diagnosis{Time: now, Suspects: suspects, Disputed: disputed}
}

// replySpread is the selector's prior share of flows of fams (one
// family, or none) whose replies change path per probe. A TCP reply over
// IPv4 keeps its 5-tuple, so its ECMP path. Over IPv6 the fabric may hash
// the flow label, and a target that does not reflect the label it gets
// (Linux by default; the lab's hosts do) labels each SYN-ACK afresh: the
// replies of one flow then spread over the paths. Neither is known, so
// both are weighed, the spread at 0.9: on the simulator less left
// innocent spines listed, and the one-path case lost nothing (see the
// selector in docs/localization.md).
func replySpread(fams []string) float64 {
	if slices.Equal(fams, []string{api.FamilyIPv6}) {
		return ipv6ReplySpread
	}
	return 0
}

// ipv6ReplySpread is replySpread's IPv6 share; a variable only for the
// sweep that chose it (TestReplySpreadSweep).
var ipv6ReplySpread = 0.9

// familiesOf lists the address families the agents' targets are probed
// over, in api.Families order.
func familiesOf(agents []*agentState) []string {
	var fams []string
	for _, a := range agents {
		for ti := range a.targets {
			if f := a.targets[ti].family; !slices.Contains(fams, f) {
				fams = append(fams, f)
			}
		}
	}
	slices.Sort(fams) // "ipv4" < "ipv6"
	return fams
}

// familyView is agents with only their targets of family fam: each
// agent's view and its target list are reused from round to round.
func familyView(agents []*agentState, fam string) []*agentState {
	out := make([]*agentState, 0, len(agents))
	for _, a := range agents {
		if a.view == nil {
			a.view = new(agentState)
		}
		a.famTargets = a.famTargets[:0]
		for ti := range a.targets {
			if a.targets[ti].family == fam {
				a.famTargets = append(a.famTargets, a.targets[ti])
			}
		}
		v := a.view
		*v = *a
		v.view, v.famTargets = nil, nil
		v.targets = a.famTargets
		out = append(out, v)
	}
	return out
}

// mergeFamilies joins each family's suspects: one listed in several
// families is one suspect (the stronger finding), one listed in a single
// family carries that family. Below ListScore, a suspect is scatter and
// keeps its family's finding as it is. A tier that one family lists
// while another's traces name a device or link is dropped, as within a
// family (localize): the tier is the weaker family's view of the same
// fault (its flows crossed the tier where its traces could not see,
// such as pods' flows through an overlay), not a second one.
func mergeFamilies(fams []string, byFam [][]Suspect) []Suspect {
	byFam = breakTies(fams, byFam)
	named := make([]bool, len(byFam)) // the family's traces name a device or link
	for i, ss := range byFam {
		for _, s := range ss {
			named[i] = named[i] || (s.Kind == KindDevice || s.Kind == KindLink) && s.Score >= ListScore
		}
	}
	anyNamed := slices.Contains(named, true)
	type found struct {
		best   Suspect
		listed []string
		in     int // families that found it at all
	}
	tierDropped := false // a family's tier, explained by another's device
	var order []string
	all := map[string]*found{}
	for i, ss := range byFam {
		for _, s := range ss {
			if s.Kind == KindTier && s.Score >= ListScore && !named[i] && anyNamed {
				tierDropped = true
				continue
			}
			key := s.Kind + "/" + s.Name
			f := all[key]
			if f == nil {
				f = &found{best: s}
				f.best.Family = fams[i]
				all[key] = f
				order = append(order, key)
			} else if s.Score > f.best.Score {
				f.best = s
				f.best.Family = fams[i]
			}
			f.in++
			if s.Score >= ListScore {
				f.listed = append(f.listed, fams[i])
			}
		}
	}
	out := make([]Suspect, 0, len(order))
	for _, key := range order {
		f := all[key]
		s := f.best
		switch {
		case len(f.listed) > 1, len(f.listed) == 0 && f.in > 1:
			s.Family = ""
		case len(f.listed) == 1 && (s.Kind == KindDevice || s.Kind == KindLink) && tierDropped:
			// The other family's flows lost too, where its traces could
			// not tell the device: it drops both. (A listed device names
			// its family, so the dropped tier was another family's.)
			s.Family = ""
		case len(f.listed) == 1:
			s.Family = f.listed[0]
			s.Evidence.Detail = strings.TrimSpace(s.Evidence.Detail + " (" + api.FamilyName(s.Family) + " only: its other family's flows did not list it)")
		}
		out = append(out, s)
	}
	sortSuspects(out)
	return out
}

// breakTies settles a tie one family's data cannot break and another's
// does: a suspect listed as tied with others in one family, one of whose
// partners another family lists apart from it (not listed there itself,
// nor tied), is dropped, and its share of the excess goes to the
// partners left. One faulty device explains both families' loss; that
// one family's flows crossed the partners alike (pods' flows over an
// overlay, whose underlay path no trace shows) says only that it could
// not tell. The cost: a fault of one family in a partner, beside one of
// the other family in the named one, is read as the latter alone.
func breakTies(fams []string, byFam [][]Suspect) [][]Suspect {
	if len(byFam) < 2 {
		return byFam
	}
	key := func(kind, name string) string { return kind + "/" + name }
	// alone[j][k]: family j lists k, and the suspects k is tied with.
	alone := make([]map[string][]Ref, len(byFam))
	for j, ss := range byFam {
		alone[j] = map[string][]Ref{}
		for _, s := range ss {
			if s.Score >= ListScore {
				alone[j][key(s.Kind, s.Name)] = s.Evidence.Ties
			}
		}
	}
	// tells reports a family other than i that lists partner p apart from
	// s, and the family's name, or "".
	tells := func(i int, s Suspect, p Ref) string {
		for j := range byFam {
			ties, listed := alone[j][key(p.Kind, p.Name)]
			_, sListed := alone[j][key(s.Kind, s.Name)]
			if j == i || !listed || sListed || slices.ContainsFunc(ties, func(r Ref) bool { return r.Kind == s.Kind && r.Name == s.Name }) {
				continue
			}
			return fams[j]
		}
		return ""
	}
	out := make([][]Suspect, len(byFam))
	for i, ss := range byFam {
		dropped := map[string]string{} // acquitted suspect: the family that told
		for _, s := range ss {
			if s.Score < ListScore {
				continue
			}
			for _, p := range s.Evidence.Ties {
				if f := tells(i, s, p); f != "" {
					dropped[key(s.Kind, s.Name)] = f
					break
				}
			}
		}
		if len(dropped) == 0 {
			out[i] = ss
			continue
		}
		kept := make([]Suspect, 0, len(ss))
		for _, s := range ss {
			if _, ok := dropped[key(s.Kind, s.Name)]; !ok {
				kept = append(kept, s)
			}
		}
		for k := range kept {
			s := &kept[k]
			var ties []Ref
			share, told := 0.0, ""
			for _, p := range s.Evidence.Ties {
				if f, ok := dropped[key(p.Kind, p.Name)]; ok {
					share, told = share+scoreOf(ss, p), f
				} else {
					ties = append(ties, p)
				}
			}
			if told == "" {
				continue
			}
			// The group split its excess equally, each member scored
			// on it; what the dropped held goes to those left.
			s.Score += share / float64(len(ties)+1)
			s.Evidence.Ties = ties
			s.Evidence.Detail += "; the " + api.FamilyName(told) + " flows tell them apart"
		}
		out[i] = kept
	}
	return out
}

// scoreOf is the score of the suspect r names in ss, or 0.
func scoreOf(ss []Suspect, r Ref) float64 {
	for _, s := range ss {
		if s.Kind == r.Kind && s.Name == r.Name {
			return s.Score
		}
	}
	return 0
}

// remember sets each suspect's Since: the first round of the current run
// of rounds in which it (kind, name and family) appeared.
func (m *Matrix) remember(now time.Time, suspects []Suspect) {
	seen := map[string]bool{}
	for i := range suspects {
		s := &suspects[i]
		key := s.Kind + "/" + s.Name + "/" + s.Family
		seen[key] = true
		since, ok := m.since[key]
		if !ok {
			since = now
			m.since[key] = now
		}
		s.Since = since
	}
	for k := range m.since {
		if !seen[k] {
			delete(m.since, k)
		}
	}
}
