package matrix

import "math"

// A link's loss reaches every flow that crosses it, whoever sends it. An
// agent that lies (or is broken) can report loss on exactly the flows
// its traces show crossing one link, and the fit, which pools every
// source's flows, names that link: one liar of five in a rack framed
// its uplink. dispute asks each chosen link's sources (judge): a link
// whose loss is better explained by a minority of its sources losing
// and the rest clean is not named. Framing one then takes most of the
// agents whose traced flows cross it. Only traced forward links count (a
// reply's path is a mixture, not a source's word).
//
// Devices are not disputed: a line card drops the traffic of some ports
// and not others, so a device's clean sources do not clear it.

// disputed is a chosen link, or a rack's uplinks, that the sources' word
// refused.
type disputed struct {
	kind, name              string
	confirm, contradict     int
	confirmers, contradicts []int32 // host devices, the first few
}

// maxDisputeNames bounds the sources a dispute names on each side.
const maxDisputeNames = 8

// dispute unchooses the chosen links (and their ties) that a minority of
// their sources confirm, and returns them.
func (s *selector) dispute(r *round, th *Thresholds) []disputed {
	var links []int32 // hypothesis indexes of chosen links
	for h := range s.hs {
		if s.hs[h].chosen && s.hs[h].kind == KindLink {
			links = append(links, int32(h))
		}
	}
	if len(links) == 0 {
		return nil
	}
	// One pass over the flows: per chosen link, per source host, the
	// probes its traced flows sent and lost over it. Dense by link and by
	// device, not maps: at 10,000 nodes this is tens of millions of flow
	// links, in rounds that chose a link only.
	slot := make([]int8, len(r.links))
	for l := range slot {
		slot[l] = -1
	}
	for i, h := range links {
		slot[s.hs[h].id] = int8(i)
	}
	per := make([][]counts, len(links))
	for i := range per {
		per[i] = make([]counts, len(r.devName))
	}
	for fi := range r.flows {
		f := &r.flows[fi]
		for _, l := range r.flowLinks[f.linkStart:f.linkEnd] {
			if i := slot[l]; i >= 0 {
				c := &per[i][f.src]
				c.sent += float64(f.sent)
				c.lost += float64(f.lost)
			}
		}
	}
	var out []disputed
	for i, h := range links {
		d := judge(th, per[i])
		if d.confirm == 0 || d.confirm >= d.contradict {
			continue
		}
		d.kind, d.name = KindLink, r.linkName(s.hs[h].id)
		s.hs[h].chosen = false
		for t := range s.hs {
			if s.hs[t].tieOf == h {
				s.hs[t].tieOf = -1
			}
		}
		out = append(out, d)
	}
	return out
}

// counts are one source's probes over what is judged.
type counts struct{ sent, lost float64 }

// judge fits two models to the sources' counts (by host device): every
// source loses at one rate, as under a lossy link; or a share of them
// loses at one rate and the rest at Healthy, as when some agents claim
// loss the others do not see. Each source's lost probes are Poisson, as
// in the estimator. The second model always fits at least as well; it
// disputes when it gains more than log(1/Alpha) nats and its losing
// share is a minority. Counting sources that pass a test instead is
// biased: under a real fault the sources that test lossy are the
// luckiest, and the rest then look clean beside them. confirm counts the
// sources more likely losing than not, contradict the rest; both are 0
// when the counts do not dispute.
func judge(th *Thresholds, per []counts) disputed {
	var d disputed
	var all counts
	n := 0
	for _, t := range per {
		if t.sent > 0 {
			all.sent, all.lost = all.sent+t.sent, all.lost+t.lost
			n++
		}
	}
	bg := th.Healthy
	if n < 2 || all.lost <= bg*all.sent {
		return d
	}
	// logf is a source's Poisson log-likelihood at rate x, less the
	// terms that do not depend on x.
	logf := func(t counts, x float64) float64 { return t.lost*math.Log(t.sent*x) - t.sent*x }
	one := 0.0
	for _, t := range per {
		if t.sent > 0 {
			one += logf(t, all.lost/all.sent)
		}
	}
	// EM over (share, rate), from half the sources at twice the pooled
	// rate.
	share, rate := 0.5, min(2*all.lost/all.sent, 1)
	resp := make([]float64, len(per))
	two := 0.0
	for range 100 {
		two = 0
		var w, k, sent float64
		for src, t := range per {
			if t.sent == 0 {
				continue
			}
			a, b := math.Log(share)+logf(t, rate), math.Log1p(-share)+logf(t, bg)
			top := max(a, b)
			lse := top + math.Log(math.Exp(a-top)+math.Exp(b-top))
			resp[src] = math.Exp(a - lse)
			two += lse
			w += resp[src]
			k += resp[src] * t.lost
			sent += resp[src] * t.sent
		}
		next := min(max(w/float64(n), 1e-9), 1-1e-9)
		nextRate := bg
		if sent > 0 {
			nextRate = min(max(k/sent, bg), 1)
		}
		moved := math.Abs(next-share) + math.Abs(nextRate-rate)
		share, rate = next, nextRate
		if moved < 1e-9 {
			break
		}
	}
	if share >= 0.5 || two-one <= -math.Log(th.Alpha) {
		return d
	}
	for src, t := range per {
		if t.sent == 0 {
			continue
		}
		if resp[src] >= 0.5 {
			d.confirm++
			if len(d.confirmers) < maxDisputeNames {
				d.confirmers = append(d.confirmers, int32(src))
			}
		} else {
			d.contradict++
			if len(d.contradicts) < maxDisputeNames {
				d.contradicts = append(d.contradicts, int32(src))
			}
		}
	}
	return d
}

// lowerTail bounds P(X <= k) for X ~ Binomial(n, p) from above with the
// Chernoff bound exp(-n KL(k/n || p)); 1 when k >= n p.
func lowerTail(k, n, p float64) float64 {
	if n <= 0 || k >= n*p {
		return 1
	}
	if p >= 1 {
		return 0
	}
	q := k / n
	if q <= 0 {
		return math.Exp(n * math.Log1p(-p))
	}
	kl := q*math.Log(q/p) + (1-q)*math.Log((1-q)/(1-p))
	return math.Exp(-n * kl)
}
