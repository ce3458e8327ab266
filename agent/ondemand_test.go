package agent

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/probe"
	"github.com/netprober/prober/tracereport"
)

// requestAgent is an agent with targets and a trace budget but no
// sockets: enough for every answer of a trace on demand but the trace.
// Its clock stands still at now.
func requestAgent(t *testing.T, budget int, tokens float64) (*Agent, time.Time) {
	t.Helper()
	now := time.Unix(1_700_000_000, 0)
	cfg := Config{Name: "n11", Tracing: Tracing{On: true, BudgetPerMinute: budget}}
	a := &Agent{cfg: cfg, log: slog.New(slog.DiscardHandler), targets: map[targetKey]*target{}, now: func() time.Time { return now }}
	eng4 := &engines{src: netip.MustParseAddr("192.0.2.11")}
	eng6 := &engines{src: netip.MustParseAddr("2001:db8::11")}
	add := func(name, addr string, ports ...uint16) {
		tg := Target{Name: name, Addr: netip.MustParseAddr(addr), Class: api.ClassNode, Port: 9808}
		eng := eng4
		if tg.Addr.Is6() {
			eng = eng6
		}
		a.targets[tg.key()] = &target{Target: tg, eng: eng, ports: ports}
	}
	add("n21", "192.0.2.21", 61000, 61001, 61002)
	add("n22", "192.0.2.22", 61003, 61004, 61005)
	add("n22", "2001:db8::22", 61006, 61007, 61008)
	add("vip", "192.0.2.80") // no tcp_syn flows
	add("wide", "192.0.2.23", 61010, 61011, 61012, 61013, 61014, 61015)
	a.paths = &paths{
		a: a, cfg: cfg.Tracing, tc: probe.TraceConfig{Probes: 3},
		traces:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_traceroutes_total"}, []string{"reason"}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{Name: "prober_path_changes_total"}),
		flows:   map[flowKey]*flowPath{}, lossy: map[flowKey]bool{},
		tokens: tokens, filled: now, life: context.Background(),
	}
	return a, now
}

func postTrace(a *Agent, query string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, api.TracePath+"?"+query, nil)
	r.Header.Set(api.TraceHeader, "1")
	a.serveTrace(w, r)
	return w
}

// TestTraceNeedsItsHeader: a trace request without api.TraceHeader, as a
// foreign page's no-cors POST in an operator's browser sends it, is
// refused before it spends anything, also on an agent that follows no
// matrix (static mode, where no pull key guards the endpoint).
func TestTraceNeedsItsHeader(t *testing.T) {
	t.Parallel()
	a, _ := requestAgent(t, 6, 6)
	before := a.paths.tokens
	w := httptest.NewRecorder()
	a.serveTrace(w, httptest.NewRequest(http.MethodPost, api.TracePath+"?target=wide&family=ipv4", strings.NewReader("")))
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), api.TraceHeader) || a.paths.tokens != before {
		t.Errorf("a trace without %s: %d %q, budget %v -> %v; want 403 naming the header, nothing spent", api.TraceHeader, w.Code, w.Body, before, a.paths.tokens)
	}
}

// TestTraceRequestRefused: every answer but a trace, each with a status
// the matrix can act on and a sentence an operator can read; none spends
// the budget.
func TestTraceRequestRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		query      string
		edit       func(a *Agent, now time.Time)
		status     int
		retryAfter string
		want       string
	}{
		{"no target", "family=ipv4", nil, 400, "", "a target name is required"},
		{"bad family", "target=n21&family=ipx", nil, 400, "", `family: "ipx" not one of ipv4, ipv6`},
		{"unknown target", "target=n99&family=ipv4", nil, 404, "", `no target "n99" (ipv4) in this agent's plan`},
		{"other family", "target=n21&family=ipv6", nil, 404, "", `no target "n21" (ipv6)`},
		{"dual-stack needs a family", "target=n22", nil, 400, "", "n22 is probed over ipv4 and ipv6"},
		{"no tcp_syn flows", "target=vip&family=ipv4", nil, 404, "", "vip (ipv4) has no tcp_syn flows"},
		{"large without large probes", "target=n21&family=ipv4&large=1", nil, 409, "", "n21 (ipv4) gets no large probes here"},
		{"more flows than the budget", "target=wide&family=ipv4", nil, 409, "", "6 flows, more traces than probing.trace.budgetPerMinute (5)"},
		{"budget short", "target=n21&family=ipv4", func(a *Agent, _ time.Time) { a.paths.tokens = 2 }, 429, "12", "holds 2 of the 3 traces"},
		// 1 token left 3 s ago at 5 a minute: 1.25 now, 1.75 short is 21 s.
		{"refilled, still short", "target=n21", func(a *Agent, now time.Time) { a.paths.tokens, a.paths.filled = 1, now.Add(-3*time.Second) }, 429, "21", "holds 1 of the 3"},
		{"already running", "target=n21&family=ipv4", func(a *Agent, now time.Time) {
			a.paths.request.Lock()
			a.paths.requestEnd = now.Add(7 * time.Second)
		}, 429, "7", "a trace is already running"},
		{"starting", "target=n21&family=ipv4", func(a *Agent, _ time.Time) { a.paths.life = nil }, 503, "", "the agent is starting"},
		{"tracing off", "target=n21&family=ipv4", func(a *Agent, _ time.Time) {
			a.cfg.Tracing.On = false
			a.paths = nil
		}, 409, "", "tracing is off on this agent"},
		{"no tcp_syn", "target=n21&family=ipv4", func(a *Agent, _ time.Time) { a.paths = nil }, 409, "", "does not probe tcp_syn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, now := requestAgent(t, 5, 5)
			if tc.edit != nil {
				tc.edit(a, now)
			}
			before := 0.0
			if a.paths != nil {
				before = a.paths.tokens
			}
			w := postTrace(a, tc.query)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.want) {
				t.Errorf("%d %q, want %d with %q", w.Code, w.Body.String(), tc.status, tc.want)
			}
			if got := w.Header().Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			if a.paths == nil {
				return
			}
			if n := testutil.ToFloat64(a.paths.traces.WithLabelValues(traceRequest)); n != 0 || a.paths.tokens < before {
				t.Errorf("refused, yet counted %v traces; tokens %v, were %v", n, a.paths.tokens, before)
			}
			if a.paths.request.TryLock() {
				a.paths.request.Unlock()
			} else if tc.name != "already running" {
				t.Error("a refused request kept the one-at-a-time lock")
			}
		})
	}
}

// TestTraceFlowsWire: what the agent answers reads back, in the matrix,
// as the very flow traces the agent made.
func TestTraceFlowsWire(t *testing.T) {
	t.Parallel()
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	fts := []probe.FlowTrace{
		{SourcePort: 61000, Reached: true, Sent: 3, Received: 2, Hops: []probe.Hop{
			{TTL: 1, Addr: a("192.0.2.1"), Sent: 3, Received: 3, RTT: 250 * time.Microsecond},
			{TTL: 2, Sent: 3},
			{TTL: 3, Addr: a("198.51.100.2"), Sent: 3, Inferred: true},
			{TTL: 4, Addr: a("192.0.2.21"), Sent: 3, Received: 2, RTT: time.Millisecond, Destination: true},
		}},
		{SourcePort: 61001, Sent: 3, Hops: []probe.Hop{{TTL: 1, Addr: a("192.0.2.1"), Sent: 3, Received: 1, Unreachable: true}}},
	}
	res := api.TraceResult{Agent: "n11", Target: "n21", Address: "192.0.2.21", Port: 9808, Source: "192.0.2.11", Family: api.FamilyIPv4,
		ProbesPerHop: 3, DurationSeconds: 1, Flows: traceFlows(fts)}
	got, err := tracereport.FromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fts {
		if g, w := got[i], fts[i]; g.SourcePort != w.SourcePort || g.Reached != w.Reached || g.Sent != w.Sent || g.Received != w.Received || len(g.Hops) != len(w.Hops) {
			t.Fatalf("flow %d: %+v, want %+v", i, g, w)
		}
		for j := range fts[i].Hops {
			if g, w := got[i].Hops[j], fts[i].Hops[j]; g != w {
				t.Errorf("flow %d hop %d: %+v, want %+v", i, j, g, w)
			}
		}
	}
}

// TestTraceReserve: periodic re-traces leave the widest target's flows
// in the bucket (at most half the budget) for a trace on demand; traces
// of new flows and of flows that lost a probe do not.
func TestTraceReserve(t *testing.T) {
	t.Parallel()
	a, now := requestAgent(t, 8, 5) // widest target: 6 flows; reserve min(6, 8/2) = 4
	p := a.paths
	p.cfg.Interval = time.Minute
	for k, tg := range a.targets {
		for _, sport := range tg.ports {
			p.flows[flowKey{k, sport}] = &flowPath{addr: tg.Addr, tracedAt: now.Add(-10 * time.Minute)}
		}
	}
	count := func() (periodic, others, reserve int) {
		jobs, reserve := p.due(now)
		for _, j := range jobs {
			if j.reason == tracePeriodic {
				periodic++
			} else {
				others++
			}
		}
		return periodic, others, reserve
	}
	if per, oth, res := count(); per != 1 || oth != 0 || res != 4 {
		t.Errorf("5 tokens, every flow due a periodic trace: %d periodic, %d others, reserve %d; want 1, 0, 4", per, oth, res)
	}
	wide := targetKey{"wide", api.FamilyIPv4}
	p.lossy[flowKey{wide, 61010}] = true
	delete(p.flows, flowKey{wide, 61011}) // new
	if per, oth, _ := count(); per != 0 || oth != 2 {
		t.Errorf("a lossy and a new flow: %d periodic, %d others; want 0 and 2 (they spend below the reserve, periodic ones wait)", per, oth)
	}
	p.tokens = 8
	if per, oth, _ := count(); per != 2 || oth != 2 {
		t.Errorf("8 tokens: %d periodic, %d others; want 2 and 2", per, oth)
	}
	p.tokens = 0.5
	if jobs, _ := p.due(now); len(jobs) != 0 {
		t.Errorf("no whole token: %d jobs", len(jobs))
	}
}
