package tracereport

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/probe"
)

// FromResult turns an agent's on-demand trace into the flow traces New
// reports on. It checks res first (api.TraceResult.Check): the answer
// comes over the network, and the report indexes hops by what it says.
func FromResult(res api.TraceResult) ([]probe.FlowTrace, error) {
	if err := res.Check(); err != nil {
		return nil, fmt.Errorf("trace result: %w", err)
	}
	var err error
	fts := make([]probe.FlowTrace, len(res.Flows))
	for i, f := range res.Flows {
		ft := probe.FlowTrace{SourcePort: f.SourcePort, Reached: f.Reached, Sent: f.Sent, Received: f.Received, Hops: make([]probe.Hop, len(f.Hops))}
		for j, h := range f.Hops {
			ft.Hops[j] = probe.Hop{
				TTL: h.TTL, Sent: h.Sent, Received: h.Received,
				RTT:         time.Duration(h.RTTSeconds * float64(time.Second)),
				Destination: h.Destination, Unreachable: h.Unreachable, Inferred: h.Inferred,
			}
			if h.Address != "" {
				if ft.Hops[j].Addr, err = parse(h.Address); err != nil {
					return nil, fmt.Errorf("trace result: flows[%d].hops[%d]: %w", i, j, err)
				}
			}
		}
		fts[i] = ft
	}
	return fts, nil
}

// NewFromResult is the report of an agent's on-demand trace: New over
// FromResult, the target named as the agent's plan names it.
// known is what the matrix holds of the flows (Trace.Known); nil for
// nothing. at is when it ended (Trace.At).
func NewFromResult(res api.TraceResult, cfg matrix.Config, known map[uint16]matrix.PairFlow, at time.Time) (Report, error) {
	fts, err := FromResult(res)
	if err != nil {
		return Report{}, err
	}
	dst, err := parse(res.Address)
	if err != nil {
		return Report{}, fmt.Errorf("trace result: address: %w", err)
	}
	src, err := parse(res.Source)
	if err != nil {
		return Report{}, fmt.Errorf("trace result: source: %w", err)
	}
	return New(Trace{
		Host: res.Target, Target: dst, Source: src,
		Port: res.Port, ProbesPerHop: res.ProbesPerHop, ProbeSize: res.ProbeSize,
		Duration: time.Duration(res.DurationSeconds * float64(time.Second)),
		Flows:    fts, Known: known, At: at,
	}, cfg)
}

// parse parses an address Check has seen: an error here is a bug, but
// no reason to panic.
func parse(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	return a.Unmap(), err
}
