package api

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// goodTrace is a sound answer: two flows, one reached through a silent
// and an inferred hop, one not reached.
func goodTrace() TraceResult {
	return TraceResult{
		Agent: "n11", Target: "n21", Address: "198.51.100.21", Port: 9808, Source: "192.0.2.11", Family: FamilyIPv4,
		ProbesPerHop: 3, DurationSeconds: 2.5,
		Flows: []TraceFlow{
			{SourcePort: 61000, Reached: true, Sent: 3, Received: 3, Hops: []TraceHop{
				{TTL: 1, Address: "192.0.2.1", Sent: 3, Received: 3, RTTSeconds: 0.001},
				{TTL: 2, Sent: 3},
				{TTL: 3, Address: "203.0.113.1", Sent: 3, Inferred: true},
				{TTL: 4, Address: "198.51.100.21", Sent: 3, Received: 3, Destination: true},
			}},
			{SourcePort: 61001, Sent: 3, Hops: []TraceHop{{TTL: 1, Address: "192.0.2.1", Sent: 3, Received: 1, Unreachable: true}}},
		},
	}
}

func TestTraceResultCheck(t *testing.T) {
	t.Parallel()
	if err := (&TraceResult{}).Check(); err == nil {
		t.Error("the zero TraceResult passes Check")
	}
	manyHops := make([]TraceHop, MaxHops+1)
	for i := range manyHops {
		manyHops[i] = TraceHop{TTL: i + 1}
	}
	for _, tc := range []struct {
		name string
		edit func(r *TraceResult)
		want string // "" for no error
	}{
		{"good", func(*TraceResult) {}, ""},
		{"no flows", func(r *TraceResult) { r.Flows = nil }, ""},
		{"ipv6", func(r *TraceResult) {
			r.Family, r.Address, r.Source = FamilyIPv6, "2001:db8::21", "2001:db8::11"
			r.Flows = []TraceFlow{{SourcePort: 1, Hops: []TraceHop{{TTL: 1, Address: "2001:db8::1", Sent: 1, Received: 1}}, Sent: 1}}
		}, ""},
		{"too many flows", func(r *TraceResult) {
			r.Flows = make([]TraceFlow, MaxFlows+1)
		}, "flows: 65, more than 64"},
		{"too many hops", func(r *TraceResult) { r.Flows[0].Hops = manyHops }, "flows[0].hops: 65, more than 64"},
		{"bad address", func(r *TraceResult) { r.Address = "garbage" }, `address: "garbage" is not a unicast IP address`},
		{"zoned source", func(r *TraceResult) { r.Source = "fe80::1%eth0" }, "source: "},
		{"unspecified", func(r *TraceResult) { r.Address = "0.0.0.0" }, "address: "},
		{"other family", func(r *TraceResult) { r.Source = "2001:db8::11" }, "source: 2001:db8::11 is not ipv4"},
		{"bad family", func(r *TraceResult) { r.Family = "ipx" }, `family: "ipx" not one of ipv4, ipv6`},
		{"long agent", func(r *TraceResult) { r.Agent = strings.Repeat("a", MaxString+1) }, "agent: 513 bytes"},
		{"no target", func(r *TraceResult) { r.Target = "" }, "target: 0 bytes"},
		{"port 0", func(r *TraceResult) { r.Port = 0 }, "port: 0"},
		{"probes", func(r *TraceResult) { r.ProbesPerHop = 256 }, "probesPerHop: 256 not in 1..255"},
		{"duration NaN", func(r *TraceResult) { r.DurationSeconds = math.NaN() }, "durationSeconds: NaN"},
		{"hop address", func(r *TraceResult) { r.Flows[0].Hops[0].Address = "192.0.2.300" }, `flows[0].hops[0]: address: "192.0.2.300" is not`},
		{"hop other family", func(r *TraceResult) { r.Flows[0].Hops[0].Address = "2001:db8::1" }, "flows[0].hops[0]: address: 2001:db8::1 is not ipv4"},
		{"hop multicast", func(r *TraceResult) { r.Flows[0].Hops[0].Address = "224.0.0.1" }, "flows[0].hops[0]: address: "},
		{"ttl order", func(r *TraceResult) { r.Flows[0].Hops[1].TTL = 7 }, "flows[0].hops[1]: ttl: 7, want 2"},
		{"received beyond sent", func(r *TraceResult) { r.Flows[0].Hops[0].Received = 4 }, "flows[0].hops[0]: sent 3, received 4"},
		{"negative", func(r *TraceResult) { r.Flows[1].Sent = -1 }, "flows[1]: sent -1"},
		{"huge count", func(r *TraceResult) { r.Flows[1].Sent = MaxTraceCount + 1 }, "flows[1]: sent 16321"},
		{"rtt infinite", func(r *TraceResult) { r.Flows[0].Hops[0].RTTSeconds = math.Inf(1) }, "flows[0].hops[0]: rttSeconds: +Inf"},
		{"silent hop heard", func(r *TraceResult) { r.Flows[0].Hops[1].Received = 1 }, "flows[0].hops[1]: a silent hop (no address) answered"},
		{"inferred hop heard", func(r *TraceResult) { r.Flows[0].Hops[2].Received = 1 }, "flows[0].hops[2]: an inferred hop was heard"},
		{"repeated port", func(r *TraceResult) { r.Flows[1].SourcePort = 61000 }, "flows[1].sourcePort: 61000 is 0 or repeated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := goodTrace()
			tc.edit(&r)
			err := r.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Check: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestTraceResultCheckBounded: an answer wrong everywhere gets a few lines,
// not one per hop.
func TestTraceResultCheckBounded(t *testing.T) {
	t.Parallel()
	r := goodTrace()
	r.Flows = make([]TraceFlow, MaxFlows)
	for i := range r.Flows {
		r.Flows[i].SourcePort = uint16(i + 1)
		for j := range MaxHops {
			r.Flows[i].Hops = append(r.Flows[i].Hops, TraceHop{TTL: j + 1, Address: "bad"})
		}
	}
	err := r.Check()
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != maxCheckErrors {
		t.Fatalf("Check: %v, want %d problems", err, maxCheckErrors)
	}
}
