package agent

import (
	"slices"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/probe"
)

// window keeps one flow's probe results over the sliding window in a ring
// that grows, up to window/interval probes, only while its oldest sample
// is still inside the window. Under the probe-rate cap a flow is probed
// far less often than every interval (a 5,000-node plan: every 8.2 s, not
// every second), so a ring sized for the interval would be mostly empty:
// 1,640 of them were 5.6 MiB (issue 14). Not safe for concurrent use: the
// target's mutex guards it.
type window struct {
	ring  []sample
	next  int
	count int
	span  time.Duration
	max   int // the most samples the ring grows to
	last  probe.Outcome
	any   bool
}

type sample struct {
	at      int64 // Unix nanoseconds: 8 bytes, where a time.Time is 24
	rtt     time.Duration
	outcome probe.Outcome
	mtu     uint16 // with TooBig: the path MTU the network said, 0 unknown
}

// minWindowSamples is a new ring's size; maxWindowSamples bounds every
// ring, so a short interval cannot make one grow without limit.
const (
	minWindowSamples = 8
	maxWindowSamples = 4096
)

func newWindow(span, interval time.Duration) *window {
	n := min(max(int(span/interval)+2, minWindowSamples), maxWindowSamples)
	return &window{ring: make([]sample, minWindowSamples), span: span, max: n}
}

func (w *window) add(at time.Time, r probe.Result) {
	ns := at.UnixNano()
	if w.count == len(w.ring) && len(w.ring) < w.max && ns-w.ring[w.next].at < int64(w.span) {
		w.grow()
	}
	w.ring[w.next] = sample{at: ns, outcome: r.Outcome, rtt: r.RTT, mtu: uint16(min(max(r.MTU, 0), 65535))}
	w.next = (w.next + 1) % len(w.ring)
	w.count = min(w.count+1, len(w.ring))
	w.last, w.any = r.Outcome, true
}

// reset forgets every sample, keeping the ring.
func (w *window) reset() {
	w.next, w.count, w.any = 0, 0, false
}

// grow doubles the full ring (up to max), oldest sample first.
func (w *window) grow() {
	ring := make([]sample, min(2*len(w.ring), w.max))
	n := copy(ring, w.ring[w.next:])
	copy(ring[n:], w.ring[:w.next])
	w.ring, w.next = ring, w.count
}

// stats summarises the samples newer than since into st and appends the
// RTTs of answered probes to rtts (for the caller's per-protocol quantiles).
func (w *window) stats(since time.Time, rtts []float64) (api.Stats, []float64) {
	var st api.Stats
	start := len(rtts)
	from := since.UnixNano()
	for i := 0; i < w.count; i++ {
		s := w.ring[(w.next-1-i+len(w.ring))%len(w.ring)]
		if s.at < from {
			break
		}
		switch s.outcome {
		case probe.OK, probe.Refused, probe.AnswerError:
			st.Sent++
			if s.rtt > 0 { // an http2_ping refusal has no round trip
				rtts = append(rtts, s.rtt.Seconds())
			}
		case probe.Lost:
			st.Sent++
			st.Lost++
		case probe.TooBig: // the network said so: no loss
			st.Sent++
			st.PathMTU = api.MinPathMTU(st.PathMTU, s.mtu)
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
