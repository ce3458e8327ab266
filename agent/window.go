package agent

import (
	"slices"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/probe"
)

// window keeps one flow's probe results over the sliding window in a ring
// sized for window/interval probes (bounded: a short interval cannot make
// it grow without limit). Not safe for concurrent use: the target's mutex
// guards it.
type window struct {
	ring  []sample
	next  int
	count int
	last  probe.Outcome
	any   bool
}

type sample struct {
	at      time.Time
	outcome probe.Outcome
	rtt     time.Duration
}

const maxWindowSamples = 4096

func newWindow(span, interval time.Duration) *window {
	n := int(span/interval) + 2
	return &window{ring: make([]sample, min(max(n, 8), maxWindowSamples))}
}

func (w *window) add(at time.Time, r probe.Result) {
	w.ring[w.next] = sample{at: at, outcome: r.Outcome, rtt: r.RTT}
	w.next = (w.next + 1) % len(w.ring)
	w.count = min(w.count+1, len(w.ring))
	w.last, w.any = r.Outcome, true
}

// stats summarises the samples newer than since into st and appends the
// RTTs of answered probes to rtts (for the caller's per-protocol quantiles).
func (w *window) stats(since time.Time, rtts []float64) (api.Stats, []float64) {
	var st api.Stats
	start := len(rtts)
	for i := 0; i < w.count; i++ {
		s := w.ring[(w.next-1-i+len(w.ring))%len(w.ring)]
		if s.at.Before(since) {
			break
		}
		switch s.outcome {
		case probe.OK, probe.Refused:
			st.Sent++
			if s.rtt > 0 { // an http2_ping refusal has no round trip
				rtts = append(rtts, s.rtt.Seconds())
			}
		case probe.Lost:
			st.Sent++
			st.Lost++
		case probe.LocalError:
			st.Errors++
		}
	}
	finish(&st, rtts[start:])
	if w.any {
		st.LastResult = w.last.String()
	}
	return st, rtts
}

// finish fills the ratio and RTT quantiles of st from the answered RTTs.
func finish(st *api.Stats, rtts []float64) {
	if st.Sent > 0 {
		st.LossRatio = float64(st.Lost) / float64(st.Sent)
	}
	if len(rtts) == 0 {
		return
	}
	sorted := slices.Clone(rtts)
	slices.Sort(sorted)
	st.RTTP50 = quantile(sorted, 0.50)
	st.RTTP99 = quantile(sorted, 0.99)
}

// quantile of sorted values, nearest rank.
func quantile(sorted []float64, q float64) float64 {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
