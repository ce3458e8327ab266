package hub

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netprober/prober/api"
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
	h.writeBody(w, httptest.NewRequest("GET", MatrixPath, nil), nil, errors.New("json: unsupported value: +Inf"))
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), "+Inf") {
		t.Errorf("got %d %q, want 500 with the reason", w.Code, w.Body.String())
	}
}

// Requests beyond maxRequests are answered 503 at once while /healthz
// still answers; the cached body is encoded once per generation.
func TestRequestCap(t *testing.T) {
	h := newTestHub(t, []string{"http://192.0.2.1:9808"}, "node") // never pulled: no round runs
	release := make(chan struct{})
	var inside sync.WaitGroup
	slow := h.limit(func(w http.ResponseWriter, r *http.Request) { inside.Done(); <-release })
	for range maxRequests {
		inside.Add(1)
		go slow(httptest.NewRecorder(), httptest.NewRequest("GET", MatrixPath, nil))
	}
	inside.Wait()
	w := httptest.NewRecorder()
	h.limit(func(http.ResponseWriter, *http.Request) { t.Error("ran beyond the cap") })(w, httptest.NewRequest("GET", MatrixPath, nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("beyond the cap: %d, want 503 with Retry-After", w.Code)
	}
	close(release)

	var e encoded
	encodes := 0
	enc := func(b *bytes.Buffer) error { encodes++; b.WriteString("{}"); return nil }
	for range 10 {
		e.get(1, time.Hour, enc, false)
	}
	e.get(2, time.Hour, enc, false)
	if body, _ := e.get(2, 0, enc, false); encodes != 3 || string(body) != "{}" {
		t.Errorf("%d encodings for 10 requests of one generation, 1 of another and 1 past its age, want 3", encodes)
	}
}

// The served endpoints, cached and capped, still answer every one of 40
// clients asking at once (the cap is 64) with a whole body. (That a
// generation is encoded once is TestRequestCap's check.)
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
			path := MatrixPath
			if i%2 == 1 {
				path = "/metrics"
			}
			resp, err := http.Get(base + path)
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
