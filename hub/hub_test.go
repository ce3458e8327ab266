package hub

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/matrix"
)

// agentServer serves canned observations on loopback, as an agent would.
func agentServer(t *testing.T, obs api.Observations, delay time.Duration, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.ObservationsPath {
			http.NotFound(w, r)
			return
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		if status != http.StatusOK {
			http.Error(w, "boom", status)
			return
		}
		obs.Time = time.Now()
		json.NewEncoder(w).Encode(obs)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// report is one agent's observations towards peers, all with the given
// tcp_syn loss. Addresses are RFC 5737: nothing is dialled.
func report(name, rack string, peers map[string]string, sent, lost uint64) api.Observations {
	obs := api.Observations{SchemaVersion: api.SchemaVersion, WindowSeconds: 60,
		Agent: api.Agent{Name: name, Class: "node", Address: "192.0.2.1", Labels: map[string]string{"rack": rack}}}
	for peer, peerRack := range peers {
		st := api.Stats{Sent: sent, Lost: lost, LossRatio: float64(lost) / float64(sent), RTTP50: 0.0002, RTTP99: 0.001}
		obs.Targets = append(obs.Targets, api.Target{Name: peer, Address: "192.0.2.2", Class: "node", Path: "node_to_node",
			Labels: map[string]string{"rack": peerRack}, Protocols: []api.Protocol{{Protocol: "tcp_syn", Stats: st}}})
	}
	return obs
}

func newTestHub(t testing.TB, agents []string, groupBy string, edits ...func(*config.Matrix)) *Hub {
	t.Helper()
	cfg := &config.Matrix{Listen: "127.0.0.1:0", Agents: agents, GroupBy: groupBy,
		Interval: config.Duration(time.Second), Timeout: config.Duration(300 * time.Millisecond)}
	for _, e := range edits {
		e(cfg)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h, err := New(cfg, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.ln.Close() })
	return h
}

func TestRoundMissingAgentsAreNoData(t *testing.T) {
	good := agentServer(t, report("n11", "r1", map[string]string{"n21": "r2"}, 100, 0), 0, 200)
	slow := agentServer(t, report("n21", "r2", map[string]string{"n11": "r1"}, 100, 100), 2*time.Second, 200)
	broken := agentServer(t, api.Observations{}, 0, http.StatusInternalServerError)
	h := newTestHub(t, []string{good, slow, broken}, "rack")

	start := time.Now()
	h.Round(context.Background())
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("a round with a slow agent took %v; the 300ms timeout should bound it", d)
	}
	snap := h.Snapshot()
	for _, c := range snap.Groups {
		if c.Lost > 0 {
			t.Errorf("loss from an agent that never answered: %+v", c)
		}
	}
	if len(snap.Groups) != 1 || snap.Groups[0].Source != "r1" || snap.Groups[0].Target != "r2" || snap.Groups[0].Sent != 100 {
		t.Errorf("groups %+v, want one r1->r2 cell with 100 sent", snap.Groups)
	}
	if d := h.Diagnosis(); d.Suspects == nil || len(d.Suspects) != 0 {
		t.Errorf("suspects %v, want an empty list", d.Suspects)
	}
	v := h.matrixView()
	states := map[string]bool{}
	for _, p := range v.Pulls {
		states[p.URL] = p.OK
	}
	if !states[good] || states[slow] || states[broken] {
		t.Errorf("pull states %v", states)
	}
	want := `
# HELP prober_matrix_agents Configured agents by the state of their latest pull: reporting or missing.
# TYPE prober_matrix_agents gauge
prober_matrix_agents{state="missing"} 2
prober_matrix_agents{state="reporting"} 1
`
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "prober_matrix_agents"); err != nil {
		t.Error(err)
	}
	if n := testutil.ToFloat64(h.met.pullErrors.WithLabelValues("timeout")); n != 1 {
		t.Errorf("timeout pull errors %v, want 1", n)
	}
	if n := testutil.ToFloat64(h.met.pullErrors.WithLabelValues("http")); n != 1 {
		t.Errorf("http pull errors %v, want 1", n)
	}
	if problems, err := testutil.GatherAndLint(h.reg); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", err, problems)
	}
}

func TestServeAndSuspect(t *testing.T) {
	// Every path out of r1's two nodes loses 30%: its ToR or the nodes.
	peers1 := map[string]string{"n21": "r2", "n31": "r3"}
	urls := []string{
		agentServer(t, report("n11", "r1", peers1, 400, 120), 0, 200),
		agentServer(t, report("n12", "r1", peers1, 400, 120), 0, 200),
		agentServer(t, report("n21", "r2", map[string]string{"n11": "r1", "n31": "r3"}, 400, 0), 0, 200),
		agentServer(t, report("n31", "r3", map[string]string{"n11": "r1", "n21": "r2"}, 400, 0), 0, 200),
	}
	h := newTestHub(t, urls, "rack")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	base := "http://" + h.Addr().String()
	deadline := time.Now().Add(5 * time.Second)
	for h.rounds.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	var m matrixView
	getJSON(t, base+api.MatrixPath, &m)
	if m.GroupBy != "rack" || len(m.Pulls) != 4 || len(m.Groups) == 0 {
		t.Errorf("matrix: groupBy %q, %d pulls, %d groups", m.GroupBy, len(m.Pulls), len(m.Groups))
	}
	// ?node= is one node's agents and the cells from or to them: what
	// kubectl prober who reads, small at any size.
	var n api.Snapshot
	getJSON(t, base+api.MatrixPath+"?node=n21", &n)
	if len(n.Agents) != 1 || n.Agents[0].Name != "n21" || len(n.Groups) == 0 || len(n.Groups) >= len(m.Groups) {
		t.Errorf("?node=n21: agents %+v, %d of %d group cells", n.Agents, len(n.Groups), len(m.Groups))
	}
	for _, c := range n.Groups {
		if c.Source != "r2" && c.Target != "r2" {
			t.Errorf("?node=n21 holds a cell of neither end's group: %+v", c)
		}
	}
	for _, c := range n.Worst {
		if c.Source != "n21" && c.Target != "n21" {
			t.Errorf("?node=n21 holds a pair it is not in: %+v", c)
		}
	}
	if body := get(t, base+api.MatrixPath+"?node=nobody"); !strings.Contains(body, `"groups":[]`) || !strings.Contains(body, `"agents":[]`) {
		t.Errorf("?node= of no agent: %s, want empty lists", body)
	}
	var d matrix.Diagnosis
	getJSON(t, base+api.DiagnosisPath, &d)
	if len(d.Suspects) == 0 {
		t.Fatalf("no suspect for a rack whose every path loses 30%%")
	}
	metrics := get(t, base+"/metrics")
	for _, want := range []string{`prober_matrix_loss_ratio{family="ipv4",path="node_to_node",protocol="tcp_syn",source="r1",target="r2"} 0.3`, "prober_suspect{", "prober_build_info{"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	page := get(t, base+"/")
	if !strings.Contains(page, "<title>prober matrix</title>") || strings.Contains(page, "src=\"http") || strings.Contains(page, "href=\"http") {
		t.Error("the page is missing or loads external assets")
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(get(t, url)), v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return string(b)
}

func TestSetAgents(t *testing.T) {
	a := agentServer(t, report("n11", "r1", map[string]string{"n21": "r2"}, 100, 0), 0, 200)
	b := agentServer(t, report("n21", "r2", map[string]string{"n11": "r1"}, 100, 0), 0, 200)
	h := newTestHub(t, []string{a}, "node")
	h.Round(context.Background())
	if got := len(h.Snapshot().Groups); got != 1 {
		t.Fatalf("one agent: %d cells, want 1", got)
	}
	h.SetAgents([]string{a, b, b})
	h.Round(context.Background())
	if got := len(h.matrixView().Pulls); got != 2 {
		t.Errorf("%d pulls after adding an agent (listed twice), want 2", got)
	}
	if got := len(h.Snapshot().Groups); got != 2 {
		t.Errorf("two agents: %d cells, want 2", got)
	}
	h.SetAgents([]string{b})
	h.Round(context.Background())
	s := h.Snapshot()
	if len(s.Groups) != 1 || s.Groups[0].Source != "n21" {
		t.Errorf("after n11 left: cells %+v, want only n21's", s.Groups)
	}
	if len(h.matrixView().Pulls) != 1 {
		t.Error("a departed agent is still listed")
	}
}

// TestKubeWritesMetrics: the matrix exports its own writes to the API
// server and what its bound holds back, as the reporter counts them, and
// nothing of the kind without a reporter.
func TestKubeWritesMetrics(t *testing.T) {
	cfg := &config.Matrix{Listen: "127.0.0.1:0", Agents: []string{"http://192.0.2.1:9090"},
		Interval: config.Duration(time.Second), Timeout: config.Duration(300 * time.Millisecond)}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	held := 3
	writes := func(visit func(object, result string, n uint64)) int {
		visit("event", "ok", 5)
		visit("node_condition", "error", 1)
		visit("node_condition", "ok", 4)
		return held
	}
	h, err := New(cfg, slog.New(slog.DiscardHandler), Options{KubeWrites: writes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.ln.Close() })
	want := `
# HELP prober_matrix_kube_writes_held Changes (a Node's condition, an Event) the writesPerMinute bound holds back now; they wait, surest first.
# TYPE prober_matrix_kube_writes_held gauge
prober_matrix_kube_writes_held 3
# HELP prober_matrix_kube_writes_total Writes the matrix made to the API server (kubernetes.nodeConditions) by object (node_condition: a Node's status patch; event) and result (ok, error).
# TYPE prober_matrix_kube_writes_total counter
prober_matrix_kube_writes_total{object="event",result="ok"} 5
prober_matrix_kube_writes_total{object="node_condition",result="error"} 1
prober_matrix_kube_writes_total{object="node_condition",result="ok"} 4
`
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "prober_matrix_kube_writes_total", "prober_matrix_kube_writes_held"); err != nil {
		t.Error(err)
	}
	held = 0 // read at each scrape, not at start
	want = `
# HELP prober_matrix_kube_writes_held Changes (a Node's condition, an Event) the writesPerMinute bound holds back now; they wait, surest first.
# TYPE prober_matrix_kube_writes_held gauge
prober_matrix_kube_writes_held 0
`
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "prober_matrix_kube_writes_held"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(h.reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	plain := newTestHub(t, []string{"http://192.0.2.1:9090"}, "")
	if n, err := testutil.GatherAndCount(plain.reg, "prober_matrix_kube_writes_total", "prober_matrix_kube_writes_held"); err != nil || n != 0 {
		t.Errorf("a matrix without a reporter exports %d write series (%v)", n, err)
	}
}
