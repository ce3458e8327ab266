package api

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
)

// Bounds of a TraceResult: the matrix reads an agent's answer as
// untrusted input (TraceResult.Check).
const (
	// MaxTraceProbes bounds the probes one flow sends at one TTL, the
	// retries included: the tracer numbers them in a byte.
	MaxTraceProbes = 255
	// MaxProbeSize bounds a probe's size: a jumbo frame, as the probe
	// engine's own bound.
	MaxProbeSize = 9216
	// MaxTraceCount bounds any count of a trace: a flow's every TTL,
	// all folded into the destination's hop.
	MaxTraceCount = MaxHops * MaxTraceProbes
	// MaxTraceResultBytes bounds the JSON of a TraceResult: MaxFlows
	// flows of MaxHops hops, each under 200 bytes.
	MaxTraceResultBytes = 1 << 20
)

// TraceResult is an agent's on-demand trace of one target's flows: every
// tcp_syn flow (source port) of the target, traced at once, each with the
// flow's own source port so that it follows the flow's ECMP path.
type TraceResult struct {
	Agent   string `json:"agent"`
	Target  string `json:"target"`  // its name in the agent's plan
	Address string `json:"address"` // the target's address traced
	Port    uint16 `json:"port"`
	Source  string `json:"source"` // the agent's address of Family
	Family  string `json:"family"`
	// ProbesPerHop is the probes each flow sent at each TTL.
	ProbesPerHop int `json:"probesPerHop"`
	// ProbeSize is the IP packet size of each probe when the trace was
	// asked large (TraceLarge); 0: bare SYNs.
	ProbeSize       int         `json:"probeSize,omitempty"`
	DurationSeconds float64     `json:"durationSeconds"`
	Flows           []TraceFlow `json:"flows"`
}

// TraceFlow is one flow's traced path.
type TraceFlow struct {
	SourcePort uint16 `json:"sourcePort"`
	// Hops in TTL order from 1: up to the destination when Reached, else
	// up to the last hop that answered.
	Hops    []TraceHop `json:"hops"`
	Reached bool       `json:"reached"`
	// Sent and Received count the probes that went past the last
	// intermediate hop: end to end.
	Sent     int `json:"sent"`
	Received int `json:"received"`
}

// TraceHop is one TTL of a traced flow.
type TraceHop struct {
	TTL int `json:"ttl"`
	// Address answered at this TTL, "" when no probe was answered.
	Address    string  `json:"address"`
	Sent       int     `json:"sent"`
	Received   int     `json:"received"`
	RTTSeconds float64 `json:"rttSeconds"` // median of the answered probes
	// Destination: the target itself answered here.
	Destination bool `json:"destination,omitempty"`
	// Unreachable: the hop answered ICMP Destination Unreachable.
	Unreachable bool `json:"unreachable,omitempty"`
	// Inferred: no probe was answered here, and Address is what the
	// other flows of the trace say the hop must be.
	Inferred bool `json:"inferred,omitempty"`
}

// maxCheckErrors bounds what Check reports: a hostile answer may be
// wrong everywhere, and a few lines say it as well as thousands.
const maxCheckErrors = 16

// Check reports what makes r unusable: too many flows or hops, addresses
// that are no IP address of the family, counts out of range, answers
// beyond what was sent. The matrix runs it on every agent's answer.
func (r *TraceResult) Check() error {
	var errs []error
	bad := func(format string, args ...any) bool {
		if len(errs) < maxCheckErrors {
			errs = append(errs, fmt.Errorf(format, args...))
		}
		return len(errs) >= maxCheckErrors
	}
	for _, f := range []struct{ name, v string }{{"agent", r.Agent}, {"target", r.Target}} {
		if f.v == "" || len(f.v) > MaxString {
			bad("%s: %d bytes not in 1..%d", f.name, len(f.v), MaxString)
		}
	}
	if r.Family != FamilyIPv4 && r.Family != FamilyIPv6 {
		bad("family: %.64q not one of %s, %s", r.Family, FamilyIPv4, FamilyIPv6)
	}
	for _, f := range []struct{ name, v string }{{"address", r.Address}, {"source", r.Source}} {
		if _, err := traceAddr(f.v, r.Family); err != nil {
			bad("%s: %w", f.name, err)
		}
	}
	if r.Port == 0 {
		bad("port: 0 is no port")
	}
	if r.ProbesPerHop < 1 || r.ProbesPerHop > MaxTraceProbes {
		bad("probesPerHop: %d not in 1..%d", r.ProbesPerHop, MaxTraceProbes)
	}
	if r.ProbeSize < 0 || r.ProbeSize > MaxProbeSize {
		bad("probeSize: %d not in 0..%d", r.ProbeSize, MaxProbeSize)
	}
	if !traceSeconds(r.DurationSeconds) {
		bad("durationSeconds: %v not in 0..%d", r.DurationSeconds, MaxSeconds)
	}
	if len(r.Flows) > MaxFlows {
		bad("flows: %d, more than %d", len(r.Flows), MaxFlows)
		return errors.Join(errs...)
	}
	seen := make(map[uint16]bool, len(r.Flows))
	for i, f := range r.Flows {
		if f.SourcePort == 0 || seen[f.SourcePort] {
			if bad("flows[%d].sourcePort: %d is 0 or repeated", i, f.SourcePort) {
				break
			}
		}
		seen[f.SourcePort] = true
		if err := traceCounts(f.Sent, f.Received); err != nil {
			bad("flows[%d]: %w", i, err)
		}
		if len(f.Hops) > MaxHops {
			if bad("flows[%d].hops: %d, more than %d", i, len(f.Hops), MaxHops) {
				break
			}
			continue
		}
		for j, h := range f.Hops {
			if err := hopProblem(h, j, r.Family); err != nil && bad("flows[%d].hops[%d]: %w", i, j, err) {
				break
			}
		}
		if len(errs) >= maxCheckErrors {
			break
		}
	}
	return errors.Join(errs...)
}

// hopProblem is what is wrong with h, the hop of index j, or nil.
func hopProblem(h TraceHop, j int, family string) error {
	if h.TTL != j+1 {
		return fmt.Errorf("ttl: %d, want %d (hops in TTL order from 1)", h.TTL, j+1)
	}
	if !traceSeconds(h.RTTSeconds) {
		return fmt.Errorf("rttSeconds: %v not in 0..%d", h.RTTSeconds, MaxSeconds)
	}
	if err := traceCounts(h.Sent, h.Received); err != nil {
		return err
	}
	if h.Address == "" {
		if h.Received > 0 || h.Inferred || h.Destination || h.Unreachable {
			return errors.New("a silent hop (no address) answered")
		}
		return nil
	}
	if _, err := traceAddr(h.Address, family); err != nil {
		return fmt.Errorf("address: %w", err)
	}
	if h.Inferred && h.Received > 0 {
		return errors.New("an inferred hop was heard")
	}
	return nil
}

// traceCounts checks a sent and received pair.
func traceCounts(sent, recv int) error {
	if sent < 0 || sent > MaxTraceCount || recv < 0 || recv > sent {
		return fmt.Errorf("sent %d, received %d: want 0 <= received <= sent <= %d", sent, recv, MaxTraceCount)
	}
	return nil
}

func traceSeconds(s float64) bool { return s >= 0 && s <= MaxSeconds && !math.IsNaN(s) }

// traceAddr parses s as a unicast address of family, as a trace's
// addresses must be.
func traceAddr(s, family string) (netip.Addr, error) {
	if len(s) > MaxString {
		return netip.Addr{}, fmt.Errorf("%d bytes, more than %d", len(s), MaxString)
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
		return netip.Addr{}, fmt.Errorf("%.64q is not a unicast IP address", s)
	}
	if a = a.Unmap(); family != "" && FamilyOf(a) != family {
		return netip.Addr{}, fmt.Errorf("%s is not %s", a, family)
	}
	return a, nil
}
