package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/buildinfo"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/tracereport"
)

// Bounds of the traces the page asks for: the matrix must not become the
// load (a click is one agent's trace budget, never more).
const (
	// maxTraces bounds the traces in flight across every agent.
	maxTraces = 4
	// traceTimeout bounds one trace, the agent's answer included.
	traceTimeout = 60 * time.Second
)

// tracing bounds the traces in flight: maxTraces in all, one per agent.
type tracing struct {
	mu      sync.Mutex
	running map[string]bool // by agent name
}

// start claims agent's slot; the error says why not.
func (t *tracing) start(agent string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running == nil {
		t.running = map[string]bool{}
	}
	switch {
	case t.running[agent]:
		return fmt.Errorf("a trace from %s is already running", agent)
	case len(t.running) >= maxTraces:
		return fmt.Errorf("%d traces are already running", len(t.running))
	}
	t.running[agent] = true
	return nil
}

func (t *tracing) done(agent string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.running, agent)
}

// serveTrace traces a cell's pair now: the matrix picks the pair, asks its
// agent (which spends its own trace budget) and names the hops.
func (h *Hub) serveTrace(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(api.TraceHeader) == "" {
		http.Error(w, "a trace is asked for by the matrix page: set the "+api.TraceHeader+" header", http.StatusForbidden)
		return
	}
	q := r.URL.Query()
	src, dst, path, fam := q.Get("source"), q.Get("target"), q.Get("path"), q.Get("family")
	if src == "" || dst == "" || path == "" || len(src)+len(dst)+len(path)+len(fam) > 4*maxDeviceName {
		http.Error(w, "give a cell: source, target, path and family", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	p, ok := h.m.PairFor(h.now(), src, dst, path, fam)
	base := h.owner[p.Agent]
	h.mu.Unlock()
	if !ok {
		http.Error(w, fmt.Sprintf("no reporting agent of %s probes %s over %s (%s)", src, dst, path, fam), http.StatusNotFound)
		return
	}
	if base == "" {
		http.Error(w, fmt.Sprintf("agent %s has no address the matrix pulls", p.Agent), http.StatusNotFound)
		return
	}
	if err := h.traces.start(p.Agent); err != nil {
		retryAfter(w, 10*time.Second)
		http.Error(w, err.Error()+"; try again when it ends", http.StatusTooManyRequests)
		return
	}
	defer h.traces.done(p.Agent)
	ctx, cancel := context.WithTimeout(r.Context(), traceTimeout)
	defer cancel()
	res, fail := h.askTrace(ctx, base, p, q.Get(api.TraceLarge) == "1")
	if fail != nil {
		h.log.Info("trace on demand failed", "agent", p.Agent, "target", p.Target, "err", fail.err)
		if fail.retry != "" {
			w.Header().Set("Retry-After", fail.retry)
		}
		http.Error(w, fail.err.Error(), fail.status)
		return
	}
	rep, err := h.traceReport(res, p.Flows)
	if err != nil {
		http.Error(w, fmt.Sprintf("agent %s's trace: %v", p.Agent, err), http.StatusBadGateway)
		return
	}
	h.writeJSON(w, r, TraceView{Pair: p, Report: rep})
}

// traceFailure is why a trace failed: the status to answer with and the
// agent's Retry-After.
type traceFailure struct {
	status int
	retry  string
	err    error
}

// askTrace asks the agent at base to trace p's flows now, large with
// its large probes' size.
func (h *Hub) askTrace(ctx context.Context, base string, p matrix.Pair, large bool) (api.TraceResult, *traceFailure) {
	var res api.TraceResult
	fail := func(status int, err error) (api.TraceResult, *traceFailure) {
		return res, &traceFailure{status: status, err: err}
	}
	v := url.Values{"target": {p.Target}, "family": {p.Family}}
	if large {
		v.Set(api.TraceLarge, "1")
	}
	u := strings.TrimSuffix(base, "/") + api.TracePath + "?" + v.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return fail(http.StatusInternalServerError, err)
	}
	req.Header.Set("User-Agent", buildinfo.UserAgent("matrix"))
	req.Header.Set(api.TraceHeader, "1")
	if h.auth != nil {
		req.Header.Set("Authorization", api.SignPull(h.auth.pullKey(p.Agent), req.Method, req.URL.RequestURI(), h.now()))
	}
	c := &http.Client{Transport: h.client.Transport, Timeout: traceTimeout, CheckRedirect: h.client.CheckRedirect}
	resp, err := c.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fail(http.StatusGatewayTimeout, fmt.Errorf("agent %s did not answer in time: %w", p.Agent, err))
		}
		return fail(http.StatusBadGateway, fmt.Errorf("agent %s: %w", p.Agent, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		status := http.StatusBadGateway
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusConflict {
			status = resp.StatusCode // the agent's budget, or its plan moved on
		}
		_, f := fail(status, fmt.Errorf("agent %s: %s: %s", p.Agent, resp.Status, strings.TrimSpace(string(msg))))
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 && n <= 3600 {
			f.retry = strconv.Itoa(n)
		}
		return res, f
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, api.MaxTraceResultBytes)).Decode(&res); err != nil {
		return fail(http.StatusBadGateway, fmt.Errorf("agent %s's trace: %w", p.Agent, err))
	}
	if err := res.Check(); err != nil {
		return fail(http.StatusBadGateway, fmt.Errorf("agent %s's trace: %w", p.Agent, err))
	}
	if res.Target != p.Target || res.Family != p.Family {
		return fail(http.StatusBadGateway, fmt.Errorf("agent %s traced %.64s (%s), not %s", p.Agent, res.Target, res.Family, p.Target))
	}
	return res, nil
}

// traceReport is the agent's trace as `prober trace` reports it, its hops
// named by the matrix's hops.
// What the matrix holds of the pair's flows weighs in the inference.
func (h *Hub) traceReport(res api.TraceResult, known map[uint16]matrix.PairFlow) (tracereport.Report, error) {
	return tracereport.NewFromResult(res, h.cfg.MatrixConfig(), known, h.now())
}
