package probe

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// HopCount is what a loss reading needs of one hop: probes sent to it and
// probes it answered.
type HopCount struct {
	Sent, Received int
}

// Loss is the share of unanswered probes, 0 when none were sent.
func (h HopCount) Loss() float64 {
	if h.Sent == 0 {
		return 0
	}
	return float64(h.Sent-h.Received) / float64(h.Sent)
}

// Noise is the end-to-end loss a flow may show and still be called
// clean: a loss ratio and a minimum number of lost probes, both of which
// must be exceeded.
type Noise struct {
	Ratio   float64
	MinLost int
}

// Lossy says whether lost of sent probes is beyond the noise.
func (n Noise) Lossy(sent, lost int) bool {
	return sent > 0 && lost >= n.MinLost && float64(lost)/float64(sent) > n.Ratio
}

// DefaultNoise calls a flow lossy from 2 lost probes and 5% loss: one
// lost SYN in a short trace is not a pattern.
var DefaultNoise = Noise{Ratio: 0.05, MinLost: 2}

// LossReading is the honest reading of one flow's trace.
type LossReading struct {
	EndToEnd HopCount // at the destination
	Loss     float64  // end-to-end loss ratio
	Lossy    bool     // Loss is above noise
	// SuspectHop is the index of the hop where the break starts: every
	// later hop, and the destination, answer less often than it does, so
	// the loss starts at it or on its link onwards. -1 when the flow is
	// not lossy, or when the break starts before the first hop.
	SuspectHop int
}

// ReadLoss reads the loss of one flow from its intermediate hops (in TTL
// order, the destination excluded) and its destination.
//
// Routers rate-limit the ICMP errors they generate (Linux:
// net.ipv4.icmp_ratelimit, 1 s per destination after a burst of 6;
// switches: control-plane policing), so an intermediate hop that answers
// seldom or never is no evidence of loss: its silence is its own. Only the
// destination's answers, which come from the target's TCP stack, measure
// the flow. So a flow is lossy only when its end-to-end loss is above
// noise, and then the loss is placed where fbtracert places it: after the
// first hop i that answered and whose every later hop, destination
// included, loses more than it by more than the noise ratio (a monotonic
// break). A lossy or silent hop followed by a better one is ICMP rate
// limiting, not loss. The first such hop, not the last: loss on the way
// back (the destination's answers take their own ECMP path) makes the
// destination lose more than the hops before it, which must not move the
// suspect past where the break starts.
func ReadLoss(hops []HopCount, dest HopCount, noise Noise) LossReading {
	lr := LossReading{EndToEnd: dest, Loss: dest.Loss(), SuspectHop: -1}
	lr.Lossy = noise.Lossy(dest.Sent, dest.Sent-dest.Received)
	if !lr.Lossy {
		return lr
	}
	// later[i] is the least loss of the hops after i, destination included.
	later := make([]float64, len(hops))
	least := dest.Loss()
	for i := len(hops) - 1; i >= 0; i-- {
		later[i] = least
		least = min(least, hops[i].Loss())
	}
	for i, h := range hops {
		if h.Received > 0 && later[i] > h.Loss()+noise.Ratio {
			lr.SuspectHop = i
			break
		}
	}
	return lr
}

// Loss reads the trace with ReadLoss. SuspectHop indexes f.Hops.
func (f FlowTrace) Loss(noise Noise) LossReading {
	hops := f.Hops
	if f.Reached && len(hops) > 0 {
		hops = hops[:len(hops)-1]
	}
	counts := make([]HopCount, len(hops))
	for i, h := range hops {
		counts[i] = HopCount{Sent: h.Sent, Received: h.Received}
	}
	return ReadLoss(counts, HopCount{Sent: f.Sent, Received: f.Received}, noise)
}

// Path returns the hop addresses in TTL order, "" for a silent hop, the
// destination last when it answered.
func (f FlowTrace) Path() []string {
	out := make([]string, len(f.Hops))
	for i, h := range f.Hops {
		if h.Addr.IsValid() {
			out[i] = h.Addr.String()
		}
	}
	return out
}

// PathHash is a short stable hash of a hop list, for telling paths apart
// at a glance and in the API.
func PathHash(hops []string) string {
	h := fnv.New64a()
	h.Write([]byte(strings.Join(hops, ",")))
	return fmt.Sprintf("%016x", h.Sum64())
}

// SamePath reports whether two traces of a flow may have taken the same
// path: the same length and no hop where both answered with different
// addresses. A silent hop matches anything, since rate-limited ICMP makes
// hops silent at random, and a path change must not be read from that.
func SamePath(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != "" && b[i] != "" && a[i] != b[i] {
			return false
		}
	}
	return true
}

// MergePath fills the silent hops of cur from prev when SamePath holds:
// the path's best-known hop list.
func MergePath(prev, cur []string) []string {
	if !SamePath(prev, cur) {
		return cur
	}
	out := make([]string, len(cur))
	for i := range cur {
		out[i] = cur[i]
		if out[i] == "" {
			out[i] = prev[i]
		}
	}
	return out
}
