package hub

import (
	"bytes"
	_ "embed"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
)

// MatrixPath is where the hub serves the loss matrix.
const MatrixPath = "/api/v1/matrix"

//go:embed index.html
var indexHTML []byte

func (h *Hub) newServer() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", h.limit(h.serveMetrics))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET "+MatrixPath, h.limit(func(w http.ResponseWriter, r *http.Request) {
		h.serveCached(w, r, &h.matrixJSON, h.cfg.Interval.D(), func(b *bytes.Buffer) error { return encodeJSON(b, h.matrixView()) })
	}))
	mux.HandleFunc("GET "+api.PlanPath, h.limit(h.servePlan))
	mux.HandleFunc("GET "+api.AgentPlanPath+"{name}", h.limitPolls(h.serveAgentPlan))
	mux.HandleFunc("GET "+matrix.DiagnosisPath, h.limit(func(w http.ResponseWriter, r *http.Request) {
		h.serveCached(w, r, &h.diagJSON, h.cfg.Interval.D(), func(b *bytes.Buffer) error { return encodeJSON(b, h.Diagnosis()) })
	}))
	mux.HandleFunc("GET "+FabricPath, h.limit(func(w http.ResponseWriter, r *http.Request) {
		h.serveCached(w, r, &h.fabricJSON, h.cfg.Interval.D(), func(b *bytes.Buffer) error { return encodeJSON(b, h.Fabric()) })
	}))
	mux.HandleFunc("GET "+FabricCellsPath, h.limit(h.serveCrossing))
	mux.HandleFunc("GET "+HistoryPath, h.limit(func(w http.ResponseWriter, r *http.Request) { h.writeJSON(w, r, h.History()) }))
	mux.HandleFunc("POST "+TracePath, h.limit(h.serveTrace))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'")
		w.Write(indexHTML)
	})
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
}

// Bounds of the matrix's HTTP server. Responses are cached per round
// (encoded), so a request costs a copy to the socket; these bound how
// many run at once and how long a slow reader may hold one.
const (
	// maxRequests bounds the requests in flight beyond the agents'
	// long-polls and /healthz; more are answered 503 at once.
	maxRequests = 64
	// maxPolls bounds the agents' plan long-polls: two agents a node at
	// 10,000 nodes, and room for a rollout's overlap.
	maxPolls = 1 << 16
	// writeTime is how long a response may take to write.
	writeTime = 30 * time.Second
)

// limit runs next when fewer than maxRequests are in flight, with a write
// deadline; else it answers 503.
func (h *Hub) limit(next http.HandlerFunc) http.HandlerFunc {
	return bounded(h.requests, writeTime, next)
}

// limitPolls is limit for the long-polls, whose deadline leaves room for
// the longest wait.
func (h *Hub) limitPolls(next http.HandlerFunc) http.HandlerFunc {
	return bounded(h.polls, api.MaxPlanWait*time.Second+writeTime, next)
}

func bounded(sem chan struct{}, deadline time.Duration, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests in flight", http.StatusServiceUnavailable)
			return
		}
		defer func() { <-sem }()
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
	}, false)
	if err != nil {
		h.log.Error("metrics", "err", err)
		http.Error(w, "gathering metrics failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", string(format))
	w.Write(body)
}

// matrixView is /api/v1/matrix: the snapshot plus the pulls behind it.
type matrixView struct {
	matrix.Snapshot
	IntervalSeconds float64 `json:"intervalSeconds"`
	Pulls           []pull  `json:"pulls"`
	// Focus is the view the page opens on: where the trouble is.
	Focus *matrix.Focus `json:"focus,omitempty"`
}

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
