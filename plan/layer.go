package plan

import (
	"cmp"
	"slices"
	"strings"
)

// layer plans one class of agents (nodes, or pods) probing its own class.
// Members of a group sit in a ring in hash order, so that ring neighbours
// are not neighbours by name (often the same chassis or subnet).
type layer struct {
	peers   []Peer // by group, then hash of name
	groups  []span // groups in name order
	groupOf []int  // peers[i] is in groups[groupOf[i]]
	budget  int    // targets per member, this layer
	ring    [][]int
	fPer    []int // per group: F duties of its busiest member
	fCap    []int // per group: F duties a member takes per round
	q       []int // per group: pair (P) duties a member takes per round
	pRounds []int // per group: rounds its P duties take
	fRounds []int // per group: rounds its F duties take
	needP   bool  // some pair of groups is left to P
	rounds  int
}

type span struct{ start, end int }

func (s span) len() int { return s.end - s.start }

func newLayer(members []Peer, budget, inGroup int) *layer {
	type keyed struct {
		p Peer
		h uint64
	}
	ks := make([]keyed, len(members))
	for i, p := range members {
		ks[i] = keyed{p, fnv64a(p.Name)}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		return cmp.Or(strings.Compare(a.p.Group, b.p.Group), cmp.Compare(a.h, b.h), strings.Compare(a.p.Name, b.p.Name))
	})
	l := &layer{peers: make([]Peer, len(ks)), groupOf: make([]int, len(ks)), budget: budget, rounds: 1}
	for i, k := range ks {
		l.peers[i] = k.p
		if i == 0 || k.p.Group != ks[i-1].p.Group {
			l.groups = append(l.groups, span{i, i})
		}
		l.groups[len(l.groups)-1].end = i + 1
		l.groupOf[i] = len(l.groups) - 1
	}
	g := len(l.groups)
	l.ring = make([][]int, g)
	l.fPer = make([]int, g)
	l.fCap = make([]int, g)
	l.q = make([]int, g)
	l.pRounds = make([]int, g)
	l.fRounds = make([]int, g)
	if g == 0 {
		return l
	}
	// F duties: member j of group b is probed by group b+1+(j mod g-1), so
	// every member has a prober in another group, and pair (a, b) is
	// covered when a-b (mod g) is at most |b|; P covers the other pairs.
	incoming := make([]int, g)
	for b, s := range l.groups {
		if g == 1 {
			break
		}
		for j := range s.len() {
			incoming[(b+1+j%(g-1))%g]++
		}
		if s.len() < g-1 {
			l.needP = true
		}
	}
	for a, s := range l.groups {
		n := s.len()
		l.ring[a] = ringOffsets(n, min(inGroup, n-1, budget))
		cross := budget - len(l.ring[a])
		l.fPer[a] = (incoming[a] + n - 1) / n
		l.fCap[a], l.fRounds[a], l.pRounds[a] = max(l.fPer[a], 1), 1, 1
		if g == 1 {
			continue
		}
		// Keep one slot for P when pairs are left to it.
		fCap := max(cross, 1)
		if l.needP {
			fCap = max(cross-1, 1)
		}
		if l.fPer[a] > fCap {
			l.fCap[a] = fCap
			l.fRounds[a] = (l.fPer[a] + fCap - 1) / fCap
		}
		if l.needP {
			l.q[a] = max(cross-min(l.fPer[a], l.fCap[a]), 1)
			l.pRounds[a] = (g - 1 + n*l.q[a] - 1) / (n * l.q[a])
		}
		l.rounds = max(l.rounds, l.fRounds[a], l.pRounds[a])
	}
	return l
}

// fnv64a is FNV-1a (hash/fnv) without its allocation per name.
func fnv64a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := range len(s) {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// ringOffsets returns k distinct offsets in [1, n): powers of two first,
// expander-like shortcuts that keep probe paths short across the ring,
// then the smallest unused. Each member probes i+offset, so each is probed
// by exactly k members (a circulant graph).
func ringOffsets(n, k int) []int {
	if k <= 0 {
		return nil
	}
	if k >= n-1 {
		out := make([]int, 0, n-1)
		for d := 1; d < n; d++ {
			out = append(out, d)
		}
		return out
	}
	out := make([]int, 0, k)
	for d := 1; d < n && len(out) < k; d *= 2 {
		out = append(out, d)
	}
	for d := 3; d < n && len(out) < k; d++ {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// assign returns each member's targets (indices into l.peers) for round:
// its ring, then its F duties, then its P duties.
func (l *layer) assign(round int) [][]int {
	g := len(l.groups)
	out := make([][]int, len(l.peers))
	for a, s := range l.groups {
		n := s.len()
		// P duties this round: at most one offset in pRounds, spread
		// over n members.
		p := 0
		if l.needP {
			p = ((g-1+l.pRounds[a]-1)/l.pRounds[a] + n - 1) / n
		}
		for i := s.start; i < s.end; i++ {
			t := make([]int, 0, len(l.ring[a])+min(l.fPer[a], l.fCap[a])+p)
			for _, d := range l.ring[a] {
				t = append(t, s.start+(i-s.start+d)%n)
			}
			out[i] = t
		}
	}
	if g < 2 {
		return out
	}
	// F: round-robin over the prober group's members, in input order, so
	// each member gets its share; a member with more than fCap takes
	// another chunk of them each round.
	next := make([]int, g)
	for b, s := range l.groups {
		for j := range s.len() {
			a := (b + 1 + j%(g-1)) % g
			pa := l.groups[a]
			k := next[a]
			next[a]++
			prober := pa.start + k%pa.len()
			chunk := (k / pa.len()) / l.fCap[a]
			if chunk == round%l.fRounds[a] {
				out[prober] = append(out[prober], s.start+j)
			}
		}
	}
	if !l.needP {
		return out
	}
	// P: group a covers every pRounds-th offset d, starting at its round,
	// skipping pairs F covers; prober and target rotate with d so a pair
	// is measured between many members over the rotation.
	for a, sa := range l.groups {
		r := round % l.pRounds[a]
		i := 0
		for d := 1 + r; d < g; d += l.pRounds[a] {
			b := (a - d + g) % g
			sb := l.groups[b]
			if d <= sb.len() {
				continue
			}
			prober := sa.start + (i+r)%sa.len()
			i++
			out[prober] = append(out[prober], sb.start+d%sb.len())
		}
	}
	return out
}
