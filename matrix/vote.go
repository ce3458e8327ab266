package matrix

import "slices"

// blame is one link 007 blamed: the votes it held when blamed, their
// share of the votes left, and the lossy flows it explains.
type blame struct {
	link  int32
	votes float64
	share float64
	flows []int32 // index into round.flows
}

// vote runs 007 over the traced lossy flows: each gives 1/h of a vote to
// each of the h known links of its path; the top link is blamed, the
// flows through it are removed, and the vote repeats while the top link
// holds at least VoteShare of the votes left or its own loss (the lost
// probes of the flows still counted through it against every probe
// through it) is significant. At thousands of nodes background loss
// spreads votes thin, which is why the significance test, not the share
// alone, keeps the loop going.
func vote(r *round, e *estimator, th *Thresholds) []blame {
	votes := make([]float64, len(r.links))
	lostVia := make([]float64, len(r.links))
	var lossy []int32
	total := 0.0
	for fi := range r.flows {
		f := &r.flows[fi]
		if f.lost == 0 || f.linkStart == f.linkEnd {
			continue
		}
		lossy = append(lossy, int32(fi))
		h := float64(f.linkEnd - f.linkStart)
		for _, l := range r.flowLinks[f.linkStart:f.linkEnd] {
			votes[l] += 1 / h
			lostVia[l] += float64(f.lost)
		}
		total++
	}
	removed := make([]bool, len(lossy))
	var out []blame
	for len(out) < 32 && total > 1e-9 {
		top := int32(-1)
		for l, v := range votes {
			if v > 1e-9 && (top < 0 || v > votes[top]) {
				top = int32(l)
			}
		}
		if top < 0 {
			break
		}
		share := votes[top] / total
		sig, _ := th.significant(lostVia[top], e.sent[top])
		if share < th.VoteShare && !sig {
			break
		}
		b := blame{link: top, votes: votes[top], share: share}
		for i, fi := range lossy {
			f := &r.flows[fi]
			path := r.flowLinks[f.linkStart:f.linkEnd]
			if removed[i] || !slices.Contains(path, top) {
				continue
			}
			removed[i] = true
			b.flows = append(b.flows, fi)
			h := float64(len(path))
			for _, l := range path {
				votes[l] -= 1 / h
				lostVia[l] -= float64(f.lost)
			}
			total--
		}
		votes[top] = 0
		out = append(out, b)
	}
	return out
}
