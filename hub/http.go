package hub

import (
	"bytes"
	_ "embed"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/httpguard"
)

//go:embed index.html
var indexHTML []byte

// appJS is the page's script, a file of its own so that the page's CSP
// allows no inline script: a string that escaped the page's escaping
// could not run.
//
//go:embed app.js
var appJS []byte

// pageCSP allows the page its own script and styles, no frame around
// it (clickjacking a trace), no base or form elsewhere.
const pageCSP = "default-src 'self'; style-src 'unsafe-inline'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

func (h *Hub) newServer() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", timed(h.serveMetrics))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET "+api.MatrixPath, timed(func(w http.ResponseWriter, r *http.Request) {
		if node := r.URL.Query().Get("node"); node != "" {
			if len(node) > maxDeviceName {
				http.Error(w, "node: too long", http.StatusBadRequest)
				return
			}
			h.writeJSON(w, r, h.nodeMatrix(node))
			return
		}
		h.serveCached(w, r, &h.matrixJSON, h.gen.Load(), h.cfg.Interval.D(), func(b *bytes.Buffer) error { return encodeJSON(b, h.matrixView()) })
	}))
	mux.HandleFunc("GET "+api.PlanPath, timed(h.servePlan))
	mux.HandleFunc("GET "+api.AgentPlanPath+"{name}", timedFor(api.MaxPlanWait*time.Second+writeTime, h.serveAgentPlan))
	mux.HandleFunc("GET "+api.DiagnosisPath, timed(func(w http.ResponseWriter, r *http.Request) {
		h.serveCached(w, r, &h.diagJSON, h.gen.Load(), h.cfg.Interval.D(), func(b *bytes.Buffer) error { return encodeJSON(b, h.Diagnosis()) })
	}))
	mux.HandleFunc("GET "+api.FabricPath, timed(func(w http.ResponseWriter, r *http.Request) {
		h.serveCached(w, r, &h.fabricJSON, h.gen.Load(), h.cfg.Interval.D(), func(b *bytes.Buffer) error { return encodeJSON(b, h.Fabric()) })
	}))
	mux.HandleFunc("GET "+api.FabricCellsPath, timed(h.serveCrossing))
	mux.HandleFunc("GET "+api.HistoryPath, timed(func(w http.ResponseWriter, r *http.Request) { h.writeJSON(w, r, h.History()) }))
	mux.HandleFunc("POST "+api.TracePath, timed(h.serveTrace))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { servePage(w, "text/html; charset=utf-8", indexHTML) })
	mux.HandleFunc("GET /app.js", func(w http.ResponseWriter, _ *http.Request) { servePage(w, "text/javascript; charset=utf-8", appJS) })
	return &http.Server{
		Handler:           h.guard.Limit(newHostNames(h.cfg).check(mux)),
		ConnContext:       h.guard.ConnContext,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		// Failed handshakes (a scanner, a plain-HTTP client) are the
		// client's; logged at debug, in the matrix's format.
		ErrorLog: slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
}

// servePage writes a file of the page with the page's protections.
func servePage(w http.ResponseWriter, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Frame-Options", "DENY") // frame-ancestors for older browsers
	h.Set("X-Content-Type-Options", "nosniff")
	w.Write(body)
}

// serverLimits bound what clients hold of the matrix's server (issue 30:
// 64 slow readers of one client made /metrics answer 503, and 15,000 idle
// connections took 375 MiB). Every source's first request is served, so
// Prometheus and an operator's page are never starved by another client;
// one source holds at most RequestsPerSource requests (long-polls
// included) and ConnsPerSource connections. An agent holds one long-poll
// and one connection; Conns leaves room for two agents a node at 10,000
// nodes, about 25 KiB each. Responses are cached per round (encoded), so
// a request costs a copy to the socket.
func serverLimits() httpguard.Limits {
	return httpguard.Limits{
		ConnsPerSource:    256,
		Conns:             24 << 10,
		RequestsPerSource: 16,
		Requests:          1024,
		QuietNew:          10 * time.Second,
		Quiet:             2 * time.Minute,
		Sweep:             time.Second,
	}
}

// writeTime is how long a response may take to write.
const writeTime = 30 * time.Second

// timed runs next with a write deadline of writeTime: a slow reader
// holds its request's slot that long at most.
func timed(next http.HandlerFunc) http.HandlerFunc { return timedFor(writeTime, next) }

// timedFor is timed for a long-poll, whose deadline leaves room for the
// longest wait.
func timedFor(deadline time.Duration, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(deadline))
		next(w, r)
	}
}

// serveMetrics serves the registry in the text format, gathered and
// encoded at most once a second or a round however many scrape.
func (h *Hub) serveMetrics(w http.ResponseWriter, r *http.Request) {
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	body, err := h.metricsText.get(h.gen.Load(), time.Second, func(b *bytes.Buffer) error {
		mfs, err := h.reg.Gather()
		if err != nil {
			return err
		}
		enc := expfmt.NewEncoder(b, format)
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				return err
			}
		}
		return nil
	}, plain)
	if err != nil {
		h.log.Error("metrics", "err", err)
		http.Error(w, "gathering metrics failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", string(format))
	w.Write(body)
}

// nodeMatrix is MatrixPath?node=: the agents running on that node (the
// plan says which), the group cells from or to their groups and the pairs
// from or to them, without the pulls: small at any cluster size, for
// `kubectl prober who`.
func (h *Hub) nodeMatrix(node string) api.Snapshot {
	names := map[string]bool{node: true}
	h.plan.mu.Lock()
	p := h.plan.plans
	h.plan.mu.Unlock()
	if p != nil {
		for _, a := range p.Agents() {
			if a.Node == node {
				names[a.Name] = true
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := api.Snapshot{Time: h.snap.Time, GroupBy: h.snap.GroupBy, Agents: []api.AgentStatus{}}
	groups := map[string]bool{}
	for _, a := range h.snap.Agents {
		if names[a.Name] {
			s.Agents = append(s.Agents, a)
			groups[a.Group] = true
		}
	}
	touching := func(cells []api.Cell, in map[string]bool) []api.Cell {
		out := []api.Cell{}
		for _, c := range cells {
			if in[c.Source] || in[c.Target] {
				out = append(out, c)
			}
		}
		return out
	}
	s.Groups, s.Worst = touching(h.snap.Groups, groups), touching(h.snap.Worst, names)
	if h.snap.Cells != nil {
		s.Cells = touching(h.snap.Cells, names)
	}
	return s
}

// matrixView is the snapshot plus the pulls behind it, at this round.
func (h *Hub) matrixView() matrixView {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := matrixView{Snapshot: h.snap, IntervalSeconds: h.cfg.Interval.D().Seconds(), Pulls: []pull{}, Focus: h.focus}
	for _, u := range h.agents {
		if p := h.pulls[u]; p != nil {
			v.Pulls = append(v.Pulls, *p)
		} else {
			v.Pulls = append(v.Pulls, pull{URL: u, Error: "not pulled yet"})
		}
	}
	slices.SortFunc(v.Pulls, func(a, b pull) int { return strings.Compare(a.URL, b.URL) })
	return v
}
