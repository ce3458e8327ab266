package hub

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
)

// tracingAgent serves obs and answers on-demand traces with res after
// delay, or with status when it is not 200; asked large, with probes of
// 1,400 bytes. Addresses are RFC 5737:
// nothing is dialled but loopback.
func tracingAgent(t *testing.T, obs api.Observations, res api.TraceResult, delay time.Duration, status *atomic.Int32, asked *atomic.Int32) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == api.ObservationsPath:
			obs.Time = time.Now()
			json.NewEncoder(w).Encode(obs)
		case r.Method == http.MethodPost && r.URL.Path == api.TracePath:
			asked.Add(1)
			if r.URL.Query().Get("target") != res.Target || r.URL.Query().Get("family") != res.Family {
				http.Error(w, "no such target", http.StatusNotFound)
				return
			}
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
			if s := int(status.Load()); s != http.StatusOK {
				w.Header().Set("Retry-After", "7")
				http.Error(w, "trace budget spent", s)
				return
			}
			out := res
			if r.URL.Query().Get(api.TraceLarge) == "1" {
				out.ProbeSize = 1400
			}
			json.NewEncoder(w).Encode(out)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// tracedReport is n11's report towards n21 over two tcp_syn flows whose
// paths cross spine1 (clean) and spine2 (lossy).
func tracedReport() api.Observations {
	obs := report("n11", "r1", map[string]string{"n21": "r2"}, 400, 40)
	obs.Agent.Address = "192.0.2.11"
	t := &obs.Targets[0]
	t.Address = "192.0.2.21"
	p := &t.Protocols[0]
	now := time.Now()
	path := func(spine string) *api.FlowPath {
		return &api.FlowPath{Hops: []string{"192.0.2.101", spine, "192.0.2.102", "192.0.2.21"}, Hash: spine, TracedAt: now, SuspectHop: -1}
	}
	p.Flows = []api.Flow{
		{SourcePort: 40001, Stats: api.Stats{Sent: 200, Lost: 0}, Path: path("192.0.2.201")},
		{SourcePort: 40002, Stats: api.Stats{Sent: 200, Lost: 40, LossRatio: 0.2}, Path: path("192.0.2.202")},
	}
	return obs
}

func traceResult() api.TraceResult {
	flow := func(sport uint16, spine string, recv int) api.TraceFlow {
		hops := []api.TraceHop{
			{TTL: 1, Address: "192.0.2.101", Sent: 3, Received: 3, RTTSeconds: 0.0001},
			{TTL: 2, Address: spine, Sent: 3, Received: 3, RTTSeconds: 0.0002},
			{TTL: 3, Address: "192.0.2.102", Sent: 3, Received: 3, RTTSeconds: 0.0003},
			{TTL: 4, Address: "192.0.2.21", Sent: 30, Received: recv, RTTSeconds: 0.0004, Destination: true},
		}
		return api.TraceFlow{SourcePort: sport, Hops: hops, Reached: true, Sent: 30, Received: recv}
	}
	return api.TraceResult{Agent: "n11", Target: "n21", Address: "192.0.2.21", Port: 4240, Source: "192.0.2.11",
		Family: api.FamilyIPv4, ProbesPerHop: 3, DurationSeconds: 1.5,
		Flows: []api.TraceFlow{flow(40001, "192.0.2.201", 30), flow(40002, "192.0.2.202", 18)}}
}

// TestPageViews: the page's endpoints. The matrix opens on the lossy
// path class, draws the traced fabric, lists the cells a device's flows
// cross, keeps the suspects' history, and traces a cell through its
// agent: only when the page asks, one trace per agent at a time, with
// the agent's refusals passed on.
func TestPageViews(t *testing.T) {
	var status, asked atomic.Int32
	status.Store(http.StatusOK)
	n11 := tracingAgent(t, tracedReport(), traceResult(), 300*time.Millisecond, &status, &asked)
	n21 := agentServer(t, report("n21", "r2", map[string]string{"n11": "r1"}, 400, 0), 0, 200)
	h := newTestHub(t, []string{n11, n21}, "node")
	h.cfg.Hops = map[string]string{"192.0.2.201": "spine1", "192.0.2.202": "spine2", "192.0.2.101": "tor1", "192.0.2.102": "tor2"}
	var err error
	if h.m, err = matrix.New(h.cfg.MatrixConfig()); err != nil {
		t.Fatal(err)
	}
	go h.srv.Serve(h.ln)
	t.Cleanup(func() { h.srv.Close() })
	h.Round(context.Background())
	base := "http://" + h.Addr().String()

	var m matrixView
	getJSON(t, base+api.MatrixPath, &m)
	if m.Focus == nil || m.Focus.Path != api.PathNodeToNode || m.Focus.Protocol != api.ProtocolTCPSYN {
		t.Errorf("focus %+v, want node_to_node tcp_syn", m.Focus)
	}
	// Gzipped when asked (3.7 MB of matrix at 5,000 nodes), the same JSON.
	req, _ := http.NewRequest("GET", base+api.MatrixPath, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("matrix with Accept-Encoding gzip: %v, Content-Encoding %q", err, resp.Header.Get("Content-Encoding"))
	}
	unzipped, _ := io.ReadAll(zr)
	resp.Body.Close()
	if plain := getPlain(t, base+api.MatrixPath); string(unzipped) != plain {
		t.Errorf("gzipped matrix differs from the plain one")
	}
	var f matrix.Fabric
	getJSON(t, base+api.FabricPath, &f)
	roles := map[string]string{}
	for _, d := range f.Devices {
		roles[d.Name] = d.Role
	}
	if roles["spine2"] != matrix.RoleSpine || roles["tor1"] != matrix.RoleToR || roles["n11"] != matrix.RoleHost {
		t.Errorf("fabric roles %v", roles)
	}
	var c crossing
	getJSON(t, base+api.FabricCellsPath+"?device=spine2", &c)
	if len(c.Cells) != 1 || c.Cells[0].Source != "n11" || c.Cells[0].Target != "n21" || c.Cells[0].LossyFlows != 1 {
		t.Errorf("cells of spine2: %+v, want n11->n21 with its one lossy flow", c.Cells)
	}
	getJSON(t, base+api.FabricCellsPath+"?device=spine1", &c)
	if len(c.Cells) != 1 || c.Cells[0].LossyFlows != 0 || c.Cells[0].Flows != 1 {
		t.Errorf("cells of spine1: %+v, want n11->n21 with one clean flow", c.Cells)
	}
	if code, _ := do(t, "GET", base+api.FabricCellsPath, nil); code != http.StatusBadRequest {
		t.Errorf("cells without a device: %d, want 400", code)
	}
	// Only the round's fabric, and at most maxCrossings computations a
	// round: a client asking for a new name each time held the hub's lock.
	if code, _ := do(t, "GET", base+api.FabricCellsPath+"?device=spine9", nil); code != http.StatusNotFound {
		t.Errorf("cells of a device the fabric does not have: %d, want 404", code)
	}
	for i := range maxCrossings {
		h.cross.keep(h.gen.Load(), fmt.Sprintf("filler%d", i), []byte("{}"))
	}
	if code, _ := do(t, "GET", base+api.FabricCellsPath+"?device=tor1", nil); code != http.StatusServiceUnavailable {
		t.Errorf("cells of a new device once the round's budget is spent: %d, want 503", code)
	}
	if code, _ := do(t, "GET", base+api.FabricCellsPath+"?device=spine2", nil); code != http.StatusOK {
		t.Errorf("cached cells once the round's budget is spent: %d, want 200", code)
	}
	h.Round(context.Background())
	if code, _ := do(t, "GET", base+api.FabricCellsPath+"?device=tor1", nil); code != http.StatusOK {
		t.Errorf("cells of tor1 the next round: %d, want 200", code)
	}
	var hist History
	getJSON(t, base+api.HistoryPath, &hist)
	if hist.WindowSeconds != 3600 || hist.Suspects == nil {
		t.Errorf("history %+v", hist)
	}

	cell := url.Values{"source": {"n11"}, "target": {"n21"}, "path": {api.PathNodeToNode}, "family": {api.FamilyIPv4}}.Encode()
	page := http.Header{api.TraceHeader: {"1"}}
	if code, body := do(t, "POST", base+api.TracePath+"?"+cell, nil); code != http.StatusForbidden || asked.Load() != 0 {
		t.Errorf("a trace without the page's header: %d %q, agent asked %d times", code, body, asked.Load())
	}
	if code, body := do(t, "POST", base+api.TracePath+"?source=n21&target=n11&path=node_to_lb&family=ipv4", page); code != http.StatusNotFound {
		t.Errorf("a cell nobody probes: %d %q, want 404", code, body)
	}
	// Two at once from one agent: the second is refused, not queued.
	second := make(chan int, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		code, _ := do(t, "POST", base+api.TracePath+"?"+cell, page)
		second <- code
	}()
	code, body := do(t, "POST", base+api.TracePath+"?"+cell, page)
	if code != http.StatusOK {
		t.Fatalf("trace: %d %s", code, body)
	}
	if c := <-second; c != http.StatusTooManyRequests {
		t.Errorf("a second trace from the same agent at once: %d, want 429", c)
	}
	var tv struct {
		TraceView
		Report struct {
			Paths []struct {
				Hops []struct {
					Address, Name string
				}
			}
			Inferred     []matrix.FlowSuspect `json:"inferredSuspects"`
			WindowProbes uint64               `json:"windowProbes"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(body), &tv); err != nil {
		t.Fatal(err)
	}
	if tv.Agent != "n11" || tv.Target != "n21" || len(tv.Report.Paths) != 2 || tv.Report.WindowProbes != 400 {
		t.Errorf("trace view %s", body)
	}
	named := false
	for _, p := range tv.Report.Paths {
		for _, hp := range p.Hops {
			named = named || hp.Name == "spine2" && hp.Address == "192.0.2.202"
		}
	}
	if !named {
		t.Errorf("no hop named spine2: %s", body)
	}
	if !strings.Contains(body, "spine2") || len(tv.Report.Inferred) == 0 || tv.Report.Inferred[0].Name != "spine2" {
		t.Errorf("the trace infers %+v, want spine2 first", tv.Report.Inferred)
	}
	// A tcp_syn_mtu cell's trace is asked large of the agent, and its
	// report says the size.
	var large struct {
		Report struct {
			ProbeSize int `json:"probeSize"`
		} `json:"report"`
	}
	code, body = do(t, "POST", base+api.TracePath+"?"+cell+"&"+api.TraceLarge+"=1", page)
	if err := json.Unmarshal([]byte(body), &large); code != http.StatusOK || err != nil || large.Report.ProbeSize != 1400 {
		t.Errorf("a large trace: %d %s; want the report of 1,400-byte probes", code, body)
	}
	// The agent's refusal (its budget) is passed on, with when to retry.
	status.Store(http.StatusTooManyRequests)
	req, _ = http.NewRequest("POST", base+api.TracePath+"?"+cell, nil)
	req.Header.Set(api.TraceHeader, "1")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" || !strings.Contains(string(msg), "budget") {
		t.Errorf("agent out of budget: %s %q Retry-After %q", resp.Status, msg, resp.Header.Get("Retry-After"))
	}
}

// getPlain GETs u without asking for compression.
func getPlain(t *testing.T, u string) string {
	t.Helper()
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(must(http.NewRequest("GET", u, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("%s unasked: Content-Encoding %q", u, resp.Header.Get("Content-Encoding"))
	}
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func do(t *testing.T, method, u string, hdr http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
