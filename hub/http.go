package hub

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
)

// MatrixPath is where the hub serves the loss matrix.
const MatrixPath = "/api/v1/matrix"

//go:embed index.html
var indexHTML []byte

func (h *Hub) newServer() *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{Registry: h.reg, MaxRequestsInFlight: 4}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET "+MatrixPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, r, h.matrixView())
	})
	mux.HandleFunc("GET "+api.PlanPath, h.servePlan)
	mux.HandleFunc("GET "+api.AgentPlanPath+"{name}", h.serveAgentPlan)
	mux.HandleFunc("GET "+matrix.DiagnosisPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, r, h.Diagnosis())
	})
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

// matrixView is /api/v1/matrix: the snapshot plus the pulls behind it.
type matrixView struct {
	matrix.Snapshot
	IntervalSeconds float64 `json:"intervalSeconds"`
	Pulls           []pull  `json:"pulls"`
}

func (h *Hub) matrixView() matrixView {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := matrixView{Snapshot: h.snap, IntervalSeconds: h.cfg.Interval.D().Seconds(), Pulls: []pull{}}
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

func writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	if r.URL.Query().Has("pretty") {
		enc.SetIndent("", "  ")
	}
	enc.Encode(v)
}
