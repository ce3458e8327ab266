//go:build linux

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/probe/probetest"
	"github.com/netprober/prober/tracereport"
)

// TestTraceRequest: an agent one router away from its target traces the
// target's flows when asked, answers what the matrix makes the report
// of, keeps the paths for its observations, and refuses a second trace
// the budget cannot pay, and anyone but the matrix once it has a pull key.
func TestTraceRequest(t *testing.T) {
	// Budget 4: one trace of the 3 flows, then 1 token. The periodic
	// traces never fall due (interval 1h, paths kept below), so what the
	// agent keeps comes from the request alone.
	src, a, _ := traceAgent(t, 62400, 3, `
  trace: {budgetPerMinute: 4, maxTTL: 4, interval: 1h}`)
	client := &http.Client{Timeout: 40 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = src.Do(func() error { c, err = (&net.Dialer{}).DialContext(ctx, network, addr); return err })
			return c, err
		},
	}}
	t.Cleanup(client.CloseIdleConnections)
	url := "http://" + a.Addr().String() + api.TracePath + "?target=dst&family=ipv4"
	post := func(auth string) (int, http.Header, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, nil)
		req.Header.Set(api.TraceHeader, "1")
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	waitFor(t, 5*time.Second, func() (bool, string) {
		a.paths.mu.Lock()
		defer a.paths.mu.Unlock()
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.targets) == 1 && a.paths.life != nil, "the agent did not start"
	})

	status, _, body := post("")
	if status != http.StatusOK {
		t.Fatalf("trace: %d %s", status, body)
	}
	var res api.TraceResult
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if err := res.Check(); err != nil {
		t.Fatalf("the agent's answer fails Check: %v\n%s", err, body)
	}
	if res.Agent != "src" || res.Target != "dst" || res.Address != "198.18.0.6" || res.Source != "198.18.0.1" || res.Port != uint16(a.cfg.Targets[0].Port) || len(res.Flows) != 3 {
		t.Fatalf("answer %+v, want src's 3 flows to dst 198.18.0.6 from 198.18.0.1", res)
	}
	for _, f := range res.Flows {
		if f.SourcePort < 62400 || f.SourcePort > 62402 || !f.Reached || len(f.Hops) != 2 ||
			f.Hops[0].Address != "198.18.0.2" || f.Hops[1].Address != "198.18.0.6" || !f.Hops[1].Destination || f.Received == 0 {
			t.Errorf("flow %+v, want 198.18.0.2 then the destination", f)
		}
	}
	rep, err := tracereport.NewFromResult(res, matrix.Config{Hops: map[string]string{"198.18.0.2": "r1"}}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Paths) != 1 || rep.Paths[0].Hops[0].Name != "r1" || len(rep.Suspects)+len(rep.Inferred) != 0 || rep.Host != "dst" {
		t.Errorf("report %+v, want one path through r1 to dst and no suspect", rep)
	}

	// The paths the matrix reads next are the request's.
	for _, f := range flowsOf(a.Observations()) {
		if f.Path == nil || !slices.Equal(f.Path.Hops, []string{"198.18.0.2", "198.18.0.6"}) {
			t.Errorf("flow %d kept path %+v, want the traced one", f.SourcePort, f.Path)
		}
	}
	for reason, want := range map[string]float64{traceRequest: 3, traceNew: 0, tracePeriodic: 0} {
		if got := testutil.ToFloat64(a.paths.traces.WithLabelValues(reason)); got != want {
			t.Errorf("prober_traceroutes_total{reason=%q} %v, want %v", reason, got, want)
		}
	}
	if got := testutil.ToFloat64(a.paths.changes); got != 3 {
		t.Errorf("prober_path_changes_total %v, want 3 (each flow's stale path replaced)", got)
	}

	// One token left: the next trace waits for two more, 30 s at 4 a
	// minute. (TestTraceRequestLarge asks large.)
	status, h, body := post("")
	if ra, _ := strconv.Atoi(h.Get("Retry-After")); status != http.StatusTooManyRequests || ra < 20 || ra > 31 || !strings.Contains(string(body), "budget") {
		t.Errorf("second trace: %d Retry-After %q %s; want 429 in about 30 s", status, h.Get("Retry-After"), body)
	}

	// With a pull key, the matrix alone may ask.
	a.pull.required.Store(true)
	a.pull.set("matrix-key")
	if status, _, body := post(""); status != http.StatusUnauthorized {
		t.Errorf("without the pull key: %d %s, want 401", status, body)
	}
	if status, _, body := post("matrix-key"); status != http.StatusTooManyRequests {
		t.Errorf("with the pull key: %d %s, want the budget's 429", status, body)
	}
}

// traceAgent starts agent src one router away from a listener on dst,
// 198.18.0.6 (src 198.18.0.1 -- .2 router .5 -- .6 dst, each in a
// namespace of the test's: nothing leaves them), the router answering
// every probe, so the path is deterministic. It probes dst over tcp_syn
// on flows source ports from base, each holding a stale path beforehand;
// extra is more of the probing block (YAML, indented two spaces).
func traceAgent(t *testing.T, base uint16, flows int, extra string) (*probetest.NS, *Agent, []string) {
	t.Helper()
	src, r, dst := probetest.NewNS(t, "src"), probetest.NewNS(t, "r"), probetest.NewNS(t, "dst")
	probetest.Connect(t, src, netip.MustParsePrefix("198.18.0.1/30"), r, netip.MustParsePrefix("198.18.0.2/30"))
	probetest.Connect(t, r, netip.MustParsePrefix("198.18.0.5/30"), dst, netip.MustParsePrefix("198.18.0.6/30"))
	src.Route(t, netip.MustParsePrefix("198.18.0.4/30"), netip.MustParseAddr("198.18.0.2"))
	dst.Route(t, netip.MustParsePrefix("198.18.0.0/30"), netip.MustParseAddr("198.18.0.5"))
	r.Sysctl(t, "net.ipv4.ip_forward", "1")
	r.Sysctl(t, "net.ipv4.icmp_ratelimit", "0")
	var ln net.Listener
	if err := dst.Do(func() (err error) { ln, err = net.Listen("tcp4", "198.18.0.6:0"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cfg, err := config.ParseAgent("test.yaml", []byte(fmt.Sprintf(`
name: src
class: node
listen: 198.18.0.1:0
probing:
  interval: 100ms
  timeout: 500ms
  window: 10s
  flows: %d
  sourcePortBase: %d
  maxTargets: 1
  protocols: [tcp_syn]%s
targets:
  - {name: dst, address: 198.18.0.6, class: node, port: %d}
`, flows, base, extra, ln.Addr().(*net.TCPAddr).Port)))
	if err != nil {
		t.Fatal(err)
	}
	var a *Agent
	rc := runtimeConfig(t, cfg)
	if err := src.Do(func() (err error) { a, err = New(rc, slog.New(slog.DiscardHandler)); return err }); err != nil {
		t.Fatal(err)
	}
	stale := []string{"192.0.2.1", "192.0.2.2", "198.18.0.6"}
	for sport := base; sport < base+uint16(flows); sport++ {
		a.paths.flows[flowKey{targetKey{"dst", api.FamilyIPv4}, sport}] = &flowPath{
			addr: netip.MustParseAddr("198.18.0.6"), hops: stale, hash: "stale", suspect: -1, tracedAt: a.now(),
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return src, a, stale
}

// TestTraceRequestLarge: asked large, the agent traces the target's
// flows with its large probes' size (probing.pmtu.size), says so, and
// keeps the paths it had: a large trace ends where large packets die,
// which is no flow's path. Here the router's link onward carries them,
// so every flow reaches.
func TestTraceRequestLarge(t *testing.T) {
	_, a, stale := traceAgent(t, 62500, 2, `
  pmtu: {every: 8, size: 1400}
  trace: {budgetPerMinute: 10, maxTTL: 4, interval: 1h}`)
	waitFor(t, 5*time.Second, func() (bool, string) {
		a.paths.mu.Lock()
		defer a.paths.mu.Unlock()
		return a.paths.life != nil, "the agent did not start"
	})
	res, err := a.paths.traceNow(context.Background(), "dst", api.FamilyIPv4, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Check(); err != nil {
		t.Fatalf("the answer fails Check: %v", err)
	}
	if res.ProbeSize != 1400 || len(res.Flows) != 2 {
		t.Fatalf("probe size %d, %d flows; want 1400 and 2", res.ProbeSize, len(res.Flows))
	}
	for _, f := range res.Flows {
		if !f.Reached {
			t.Errorf("flow %d did not reach 198.18.0.6 with 1,400 bytes over 1,500-byte links: %+v", f.SourcePort, f)
		}
	}
	for _, f := range flowsOf(a.Observations()) {
		if f.Path == nil || !slices.Equal(f.Path.Hops, stale) {
			t.Errorf("flow %d: path %+v after a large trace, want the one it had", f.SourcePort, f.Path)
		}
	}
}
