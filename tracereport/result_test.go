package tracereport

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
)

// asResult is t as an agent would answer it (the agent's own conversion
// is tested in agent against this function's reading).
func asResult(tr Trace) api.TraceResult {
	res := api.TraceResult{
		Agent: "n11", Target: "n21", Address: tr.Target.String(), Port: tr.Port, Source: tr.Source.String(),
		Family: api.FamilyOf(tr.Target), ProbesPerHop: tr.ProbesPerHop, DurationSeconds: tr.Duration.Seconds(),
		Flows: []api.TraceFlow{},
	}
	for _, ft := range tr.Flows {
		f := api.TraceFlow{SourcePort: ft.SourcePort, Reached: ft.Reached, Sent: ft.Sent, Received: ft.Received, Hops: []api.TraceHop{}}
		for _, h := range ft.Hops {
			th := api.TraceHop{TTL: h.TTL, Sent: h.Sent, Received: h.Received, RTTSeconds: h.RTT.Seconds(),
				Destination: h.Destination, Unreachable: h.Unreachable, Inferred: h.Inferred}
			if h.Addr.IsValid() {
				th.Address = h.Addr.String()
			}
			f.Hops = append(f.Hops, th)
		}
		res.Flows = append(res.Flows, f)
	}
	return res
}

// TestReportFromResult: an agent's answer makes the report `prober trace`
// prints for the same flows, the target named as the agent's plan names
// it, its hops named by the matrix's config.
func TestReportFromResult(t *testing.T) {
	t.Parallel()
	tr := lossyTrace(t)
	tr.Flows[0].Hops[1].RTT = 1500 * time.Microsecond
	cfg := matrix.Config{Hops: map[string]string{"198.51.100.2": "spine2"}}
	res := asResult(tr)
	// Through JSON, as the matrix receives it.
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got api.TraceResult
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	fts, err := FromResult(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(fts) != len(tr.Flows) {
		t.Fatalf("%d flows, want %d", len(fts), len(tr.Flows))
	}
	for i, ft := range fts {
		want := tr.Flows[i]
		if ft.SourcePort != want.SourcePort || ft.Reached != want.Reached || ft.Sent != want.Sent || ft.Received != want.Received || len(ft.Hops) != len(want.Hops) {
			t.Fatalf("flow %d: %+v, want %+v", i, ft, want)
		}
		for j, h := range ft.Hops {
			if h != want.Hops[j] {
				t.Errorf("flow %d hop %d: %+v, want %+v", i, j, h, want.Hops[j])
			}
		}
	}
	rep, err := NewFromResult(got, cfg, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := New(tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	direct.Host = "n21"
	var a, b2 strings.Builder
	Print(&a, rep)
	Print(&b2, direct)
	if a.String() != b2.String() {
		t.Errorf("report from the result:\n%s\nwant, as New makes it:\n%s", a.String(), b2.String())
	}
	if rep.Host != "n21" || rep.Target != "192.0.2.99" || len(rep.Suspects) != 1 || rep.Suspects[0].Name != "spine2" {
		t.Errorf("host %q target %q suspects %+v; want n21, 192.0.2.99, spine2", rep.Host, rep.Target, rep.Suspects)
	}
}

// TestReportFromResultRefuses: what Check refuses never reaches the report.
func TestReportFromResultRefuses(t *testing.T) {
	t.Parallel()
	res := asResult(lossyTrace(t))
	res.Flows[2].Hops = append(res.Flows[2].Hops, make([]api.TraceHop, api.MaxHops)...)
	if _, err := FromResult(res); err == nil || !strings.Contains(err.Error(), "flows[2].hops: 68, more than 64") {
		t.Errorf("FromResult: %v, want too many hops refused", err)
	}
	res = asResult(lossyTrace(t))
	res.Flows[0].Hops[0].Received = 2 // of 1 sent
	if _, err := NewFromResult(res, matrix.Config{}, nil, t0); err == nil {
		t.Error("NewFromResult took more answers than probes")
	}
}

// FuzzNewFromResult: whatever an agent answers, the matrix never panics
// making the report of it.
func FuzzNewFromResult(f *testing.F) {
	tr := Trace{Host: "dst", Target: netip.MustParseAddr("192.0.2.99"), Source: netip.MustParseAddr("192.0.2.10"), Port: 9808, ProbesPerHop: 1}
	seed, _ := json.Marshal(asResult(tr))
	f.Add(seed)
	f.Add([]byte(`{"agent":"a","target":"t","address":"192.0.2.9","port":1,"source":"192.0.2.1","family":"ipv4","probesPerHop":1,` +
		`"flows":[{"sourcePort":1,"sent":5,"received":1,"hops":[{"ttl":1,"address":"192.0.2.1","sent":5,"received":5},{"ttl":2,"sent":5},{"ttl":3,"address":"192.0.2.9","sent":5,"received":1,"destination":true}],"reached":true},` +
		`{"sourcePort":2,"sent":5,"received":5,"hops":[{"ttl":1,"address":"192.0.2.1","sent":5,"received":0,"inferred":true},{"ttl":2,"address":"192.0.2.3","sent":5,"received":5}]}]}`))
	cfg := matrix.Config{Hops: map[string]string{"192.0.2.0/28": "tor"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		var res api.TraceResult
		if json.Unmarshal(b, &res) != nil {
			return
		}
		rep, err := NewFromResult(res, cfg, nil, t0)
		if err != nil {
			return
		}
		var sb strings.Builder
		Print(&sb, rep)
	})
}
