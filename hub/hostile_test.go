package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/probe/probetest"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// rotating serves a report under a new agent name on every pull.
func rotating(t *testing.T, prefix string) string {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		name := prefix + strings.Repeat("x", n)
		mu.Unlock()
		obs := report(name, "r9", map[string]string{"n21": "r2"}, 100, 100)
		writeObs(w, obs)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func writeObs(w http.ResponseWriter, obs api.Observations) {
	obs.Time = time.Now()
	w.Header().Set("Content-Type", "application/json")
	var b bytes.Buffer
	encodeJSON(&b, obs)
	w.Write(b.Bytes())
}

// Names cannot move and do not pile up: an address reporting a new name
// each round holds one agent in the matrix, and a report in the name of
// an agent another listed address reports for is refused.
func TestNamesDoNotMove(t *testing.T) {
	honest := agentServer(t, report("n11", "r1", map[string]string{"n21": "r2"}, 100, 0), 0, 200)
	thief := agentServer(t, report("n11", "r1", map[string]string{"n21": "r2"}, 100, 100), 0, 200)
	rot := rotating(t, "rogue")
	h := newTestHub(t, []string{honest, thief, rot}, "node")
	for range 5 {
		h.Round(context.Background())
	}
	var agents []string
	for _, a := range h.Snapshot().Agents {
		agents = append(agents, a.Name)
	}
	if len(agents) != 2 || agents[0] != "n11" || agents[1] != "rogue"+strings.Repeat("x", 5) {
		t.Errorf("agents %q, want n11 and the rotating address's latest name only", agents)
	}
	for _, p := range h.matrixView().Pulls {
		if p.URL == thief && (p.OK || !strings.Contains(p.Error, honest)) {
			t.Errorf("the thief's pull: %+v, want refused naming the honest address", p)
		}
	}
	for _, g := range h.Snapshot().Groups {
		if g.Source == "n11" && g.Lost != 0 {
			t.Errorf("the thief's loss was filed under n11: %+v", g)
		}
	}
	// The honest address leaves: the name is free for another.
	h.SetAgents([]string{thief})
	h.Round(context.Background())
	if p := h.matrixView().Pulls[0]; !p.OK {
		t.Errorf("after the owner left: %+v, want accepted", p)
	}
}

// The matrix follows no redirect: an agent answering for another address
// is a failed pull.
func TestPullFollowsNoRedirect(t *testing.T) {
	target := agentServer(t, report("n21", "r2", map[string]string{"n11": "r1"}, 100, 0), 0, 200)
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.Path, http.StatusFound)
	}))
	t.Cleanup(redir.Close)
	h := newTestHub(t, []string{redir.URL}, "node")
	h.Round(context.Background())
	if p := h.matrixView().Pulls[0]; p.OK || p.Reason != "http" {
		t.Errorf("pull through a redirect: %+v, want a failed http pull", p)
	}
}

// A response that cannot be encoded is a 500, not an empty 200.
func TestEncodeErrorIs500(t *testing.T) {
	h := newTestHub(t, []string{"http://192.0.2.1:9808"}, "node") // never pulled: no round runs
	w := httptest.NewRecorder()
	h.writeBody(w, httptest.NewRequest("GET", api.MatrixPath, nil), nil, errors.New("json: unsupported value: +Inf"))
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), "+Inf") {
		t.Errorf("got %d %q, want 500 with the reason", w.Code, w.Body.String())
	}
}

// TestOneClientCannotStarve (issue 30): one source holding every request
// it may (long-polls that never end) and every connection it may gets
// 503 and refused connections beyond its share, while Prometheus's
// scrape and an operator's page, from other sources, are served; the
// shared slots, once taken, refuse a second request of any source but
// never a source's first. Before, one client's 64 slow requests made
// /metrics answer 503.
func TestOneClientCannotStarve(t *testing.T) {
	h := newTestHub(t, []string{"http://192.0.2.1:9808"}, "node") // never pulled: no round runs
	h.guard.Lim.RequestsPerSource, h.guard.Lim.Requests, h.guard.Lim.ConnsPerSource = 6, 3, 24
	go h.srv.Serve(h.ln)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.guard.Run(ctx)
	addr := h.ln.Addr().String()
	get := func(src netip.Addr, path string) (int, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: probetest.DialerFrom(src), DisableKeepAlives: true}}
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// The attacker: long-polls for a plan that never comes, each on a
	// connection of its own, until refused.
	attacker := probetest.Loopback(30, 1)
	held := 0
	poll := api.AgentPlanPath + "nobody?wait=60"
	var conns []net.Conn
	t.Cleanup(func() { closeAll(conns) })
	for range 8 {
		c := probetest.DialFrom(t, attacker, addr)
		conns = append(conns, c)
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", poll)
	}
	waitFor(t, "the attacker's polls in flight", func() bool { held = h.guard.InFlight(); return held == 4 })
	// 4: its first, then 3 shared slots; the shared cap ends it before
	// its own (6).
	for _, tc := range []struct {
		src  netip.Addr
		path string
		want int
	}{
		{attacker, "/metrics", http.StatusServiceUnavailable},
		{probetest.Loopback(30, 2), "/metrics", http.StatusOK},     // Prometheus
		{probetest.Loopback(30, 3), api.MatrixPath, http.StatusOK}, // the page
		{probetest.Loopback(30, 3), "/healthz", http.StatusOK},     // the kubelet, on the page's source
	} {
		if code, err := get(tc.src, tc.path); err != nil || code != tc.want {
			t.Errorf("GET %s from %s: %d (%v), want %d", tc.path, tc.src, code, err, tc.want)
		}
	}
	// Connections: the attacker's beyond ConnsPerSource are closed on
	// accept.
	for range 30 {
		c, err := probetest.DialerFrom(attacker)(context.Background(), "tcp4", addr)
		if err == nil {
			conns = append(conns, c)
		}
	}
	waitFor(t, "the attacker's connections beyond its share refused", func() bool { return h.guard.Stats().RefusedPerSource >= 38-24 })
	// Open counts every source's: the page's and Prometheus's closed
	// connections above may still be counted for a moment (CI saw 25).
	waitFor(t, "no more connections held than the attacker's 24", func() bool { return h.guard.Open() <= 24 })
	if code, err := get(probetest.Loopback(30, 2), "/metrics"); err != nil || code != http.StatusOK {
		t.Errorf("GET /metrics with the attacker at its connection cap: %d (%v), want 200", code, err)
	}
}

// waitFor polls cond for up to 5 s, or fails the test saying what.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
	}
}

func closeAll(cs []net.Conn) {
	for _, c := range cs {
		c.Close()
	}
}

// TestCachedForms: a body is encoded once per generation, and its gzipped
// and indented forms made once per body, shared by every request.
func TestCachedForms(t *testing.T) {
	var e encoded
	encodes := 0
	enc := func(b *bytes.Buffer) error { encodes++; b.WriteString(`{"a":1}`); return nil }
	for range 10 {
		e.get(1, time.Hour, enc, plain)
	}
	e.get(2, time.Hour, enc, plain)
	if body, _ := e.get(2, 0, enc, plain); encodes != 3 || string(body) != `{"a":1}` {
		t.Errorf("%d encodings for 10 requests of one generation, 1 of another and 1 past its age, want 3", encodes)
	}
	p1, _ := e.get(2, time.Hour, enc, indented)
	p2, _ := e.get(2, time.Hour, enc, indented)
	if string(p1) != "{\n  \"a\": 1\n}" || &p1[0] != &p2[0] {
		t.Errorf("?pretty: %q, shared %v; want the indented body, one copy for both requests", p1, &p1[0] == &p2[0])
	}
}

// The served endpoints, cached and guarded, still answer every one of 40
// clients (each from a source of its own) asking at once with a whole
// body. (That a generation is encoded once is TestCachedForms's check.)
func TestServedEndpointsAnswerTogether(t *testing.T) {
	a := agentServer(t, report("n11", "r1", map[string]string{"n21": "r2"}, 100, 0), 0, 200)
	h := newTestHub(t, []string{a}, "node")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	base := "http://" + h.Addr().String()
	deadline := time.Now().Add(10 * time.Second)
	for h.rounds.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := api.MatrixPath
			if i%2 == 1 {
				path = "/metrics"
			}
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: probetest.DialerFrom(probetest.Loopback(41, i+1))}}
			resp, err := c.Get(base + path)
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || len(b) == 0 {
				errs <- path + ": " + resp.Status
			}
			if path == "/metrics" && !strings.Contains(string(b), "prober_matrix_rounds_total") {
				errs <- "/metrics without prober_matrix_rounds_total"
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestPageProtections: the page and its script come with a CSP that runs
// no inline script and lets no other site frame the page (a click on a
// framed cell would trace), and a trace asked without api.TraceHeader,
// as a cross-site form asks, is refused.
func TestPageProtections(t *testing.T) {
	h := newTestHub(t, []string{"http://192.0.2.11:9808"}, "rack")
	srv := httptest.NewServer(h.srv.Handler)
	t.Cleanup(srv.Close)
	for _, path := range []string{"/", "/app.js"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		if resp.StatusCode != 200 || len(body) == 0 || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "script-src 'unsafe-inline'") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: %s, %d bytes, CSP %q, X-Frame-Options %q", path, resp.Status, len(body), csp, resp.Header.Get("X-Frame-Options"))
		}
		if path == "/" && (bytes.Contains(body, []byte("<script>")) || !bytes.Contains(body, []byte(`<script src="app.js">`))) {
			t.Error("the page holds an inline script, or does not load app.js")
		}
	}
	resp, err := http.Post(srv.URL+api.TracePath+"?source=a&target=b&path=node_to_node&family=ipv4", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a trace without %s: %s, want 403", api.TraceHeader, resp.Status)
	}
}

// TestHostNames: a request naming a Host the matrix does not go by (a
// page that rebound its own name to the matrix, through an operator's
// port-forward) is refused, the page and the trace included; addresses,
// localhost, configured names and, with discovery, the Service's names
// pass.
func TestHostNames(t *testing.T) {
	cfg := &config.Matrix{Hosts: []string{"matrix.example.com", "*.prober.example.org"}}
	static := newHostNames(cfg)
	kube := newHostNames(&config.Matrix{Discovery: config.DiscoveryKubernetes, Kubernetes: &config.Kubernetes{Namespace: "monitoring"}})
	for _, tc := range []struct {
		host         string
		static, kube bool
	}{
		{"198.51.100.7:9809", true, true},
		{"[2001:db8::7]:9809", true, true},
		{"localhost:9809", true, true},
		{"LOCALHOST.", true, true},
		{"app.localhost", true, true},
		{"matrix.example.com", true, false},
		{"a.prober.example.org:80", true, false},
		{"prober.example.org", false, false},
		{"prober-matrix", false, true},
		{"prober-matrix.monitoring.svc:9809", false, true},
		{"prober-matrix.monitoring.svc.cluster.local", false, true},
		{"prober-matrix.prober.svc", false, false},
		{"rebind.attacker.example", false, false},
		{"198.51.100.7.attacker.example", false, false},
		{"", false, false},
	} {
		if got := static.allowed(tc.host); got != tc.static {
			t.Errorf("static, hosts %v: Host %q allowed %v, want %v", cfg.Hosts, tc.host, got, tc.static)
		}
		if got := kube.allowed(tc.host); got != tc.kube {
			t.Errorf("discovery in namespace monitoring: Host %q allowed %v, want %v", tc.host, got, tc.kube)
		}
	}
	h := newTestHub(t, []string{"http://192.0.2.11:9808"}, "rack")
	srv := httptest.NewServer(h.srv.Handler)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		method, path, host, origin string
		want                       int
	}{
		{"GET", "/", "rebind.attacker.example", "", http.StatusMisdirectedRequest},
		{"GET", api.MatrixPath, "rebind.attacker.example:80", "", http.StatusMisdirectedRequest},
		{"POST", api.TracePath, "rebind.attacker.example", "", http.StatusMisdirectedRequest},
		{"GET", "/", "", "", http.StatusOK}, // the server's own address
		{"GET", "/", "localhost", "", http.StatusOK},
		// A state-changing request from another site's page is refused by
		// its Origin; a read is not (the browser keeps its answer from
		// the page anyway).
		{"POST", api.TracePath, "localhost", "http://attacker.example", http.StatusForbidden},
		{"POST", api.TracePath, "localhost", "null", http.StatusForbidden},
		{"POST", api.TracePath, "localhost", "http://localhost:8080", http.StatusBadRequest}, // past the guard: no cell asked
		{"GET", api.MatrixPath, "localhost", "http://attacker.example", http.StatusOK},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		req.Header.Set(api.TraceHeader, "1")
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s with Host %q, Origin %q: %s, want %d", tc.method, tc.path, tc.host, tc.origin, resp.Status, tc.want)
		}
	}
}

// TestReportsTakeDiscoverysWord: in Kubernetes mode an agent's report
// cannot move it or its targets to another rack, nor add a target the plan
// does not have (issue 30: colluding agents framed a link by claiming
// another rack's flows).
func TestReportsTakeDiscoverysWord(t *testing.T) {
	liar := report("n21", "r1", map[string]string{"n11": "r9", "ghost": "r1"}, 100, 40)
	liar.Agent.Address = "192.0.2.99"
	for i := range liar.Targets {
		if liar.Targets[i].Name == "n11" {
			liar.Targets[i].Address = "192.0.2.11"
		}
	}
	url := agentServer(t, liar, 0, 200)
	h := newTestHub(t, []string{url}, "rack")
	ps := []api.Peer{
		{Name: "n11", Class: api.ClassNode, Address: "192.0.2.11", Port: 9808, Labels: map[string]string{"node": "n11", "rack": "r1"}},
		{Name: "n21", Class: api.ClassNode, Address: "192.0.2.21", Port: 9808, Labels: map[string]string{"node": "n21", "rack": "r2"}},
	}
	h.SetPeers(ps, map[string]string{"n21": url})
	h.Round(context.Background())
	groups := h.Snapshot().Groups
	if len(groups) != 1 || groups[0].Source != "r2" || groups[0].Target != "r1" {
		t.Errorf("cells %+v, want one r2->r1: the liar's rack and its target's from discovery, the ghost dropped", groups)
	}
	if n := testutil.ToFloat64(h.met.unplanned); n != 1 {
		t.Errorf("unplanned targets counted %v, want 1 (ghost)", n)
	}
	// The same report in static mode (no discovery) is taken as it is.
	static := newTestHub(t, []string{url}, "rack")
	static.Round(context.Background())
	if g := static.Snapshot().Groups; len(g) != 2 {
		t.Errorf("static mode: cells %+v, want the report's own 2", g)
	}
}

// TestDisputedExported: what the matrix refused on its sources' word is a
// series of its own, never prober_suspect.
func TestDisputedExported(t *testing.T) {
	h := newTestHub(t, []string{"http://192.0.2.1:9808"}, "rack")
	h.mu.Lock()
	h.diag = api.Diagnosis{Suspects: []api.Suspect{}, Disputed: []api.Dispute{
		{Kind: api.KindLink, Name: "tor1->spine2", Confirming: 2, Contradicting: 3, Confirmers: []string{"n11", "n12"}},
	}}
	h.mu.Unlock()
	mfs, err := h.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		switch mf.GetName() {
		case "prober_suspect":
			t.Errorf("a disputed link exported as a suspect: %v", mf)
		case "prober_disputed":
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				found = labels["kind"] == "link" && labels["name"] == "tor1->spine2" && m.GetGauge().GetValue() == 2
			}
		}
	}
	if !found {
		t.Error("prober_disputed{kind=link,name=tor1->spine2} 2 not exported")
	}
}
