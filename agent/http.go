package agent

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/buildinfo"
	"github.com/netprober/prober/httpguard"
	"github.com/netprober/prober/probe"
)

// newServer serves the agent's endpoints over HTTP/1.1 and h2c, or TLS,
// and answers the other agents' HTTP/2 PINGs.
//
// Every request goes through the connection guard's slots (httpguard), and
// /metrics and the observations are encoded once per sharedTTL for all
// their readers (shared.go): promhttp's own in-flight cap made /metrics
// answer 503 to everyone while 4 streams stalled.
func (a *Agent) newServer() (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", &sharedResponse{
		h:       promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{Registry: a.reg, ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelError)}),
		ttl:     sharedTTL,
		variant: metricsVariant,
		canon:   metricsCanon,
		gen:     a.gen.Load,
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "3")
		w.Write(healthzBody)
	})
	mux.Handle("GET "+api.ObservationsPath, a.pull.guard(&sharedResponse{
		h:       http.HandlerFunc(a.serveObservations),
		ttl:     sharedTTL,
		variant: observationsVariant,
		gen:     a.gen.Load,
	}))
	// A trace on demand costs the switches what the periodic ones do:
	// only the matrix may ask, like the observations (docs/agent.md).
	mux.Handle("POST "+api.TracePath, a.pull.guard(http.HandlerFunc(a.serveTrace)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "prober agent %s (%s)\n\n/metrics\n/healthz\n%s\nPOST %s?target=NAME&family=ipv4|ipv6\n", a.cfg.Name, buildinfo.Version, api.ObservationsPath, api.TracePath)
	})
	srv, err := probe.NewResponder(a.conns.Limit(mux), a.responderConfig())
	if err != nil {
		return nil, err
	}
	srv.ConnContext = a.conns.ConnContext
	return srv, nil
}

var healthzBody = []byte("ok\n")

// serveObservations encodes the observations whole before writing, so
// that an encoding error is a 500 (an RTT of +Inf made the encoder fail
// after the 200 went out: an empty page, issue 15).
func (a *Agent) serveObservations(w http.ResponseWriter, r *http.Request) {
	var b []byte
	var err error
	if r.URL.Query().Has("pretty") {
		b, err = json.MarshalIndent(a.Observations(), "", "  ")
	} else {
		b, err = json.Marshal(a.Observations())
	}
	if err != nil {
		a.log.Error("observations encode", "err", err)
		http.Error(w, "observations encode failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

// Observations snapshots every target's windows.
func (a *Agent) Observations() api.Observations {
	now := a.now()
	span := a.cfg.Window
	since := now.Add(-span)
	obs := api.Observations{
		SchemaVersion: api.SchemaVersion,
		Agent: api.Agent{
			Name: a.cfg.Name, Class: a.cfg.Class, Address: a.src.String(),
			Addresses: a.addrs, Version: buildinfo.Version,
		},
		Time:          now,
		WindowSeconds: a.cfg.Window.Seconds(),
		Targets:       []api.Target{},
	}
	a.mu.Lock()
	obs.Agent.Labels = a.labels
	obs.Agent.FirstHop = addrString(a.firstHop)
	obs.Agent.HostAddresses = a.hostAddrs
	ts := make([]*target, 0, len(a.targets))
	for _, t := range a.targets {
		ts = append(ts, t)
	}
	a.mu.Unlock()
	slices.SortFunc(ts, func(x, y *target) int { return compareKeys(x.key(), y.key()) })
	var rtts []float64
	for _, t := range ts {
		at := api.Target{Name: t.Name, Address: t.Addr.String(), Class: t.Class, Family: t.Family(), Port: t.Port, Path: t.path}
		t.mu.Lock()
		at.Labels = t.Labels
		at.Backends = t.Backends
		at.EstablishedFlowBlackhole = t.blackhole(now)
		for _, proto := range a.reported {
			ps, ok := t.protos[proto]
			if !ok {
				continue
			}
			p := api.Protocol{Protocol: string(proto)}
			if proto == probe.ProtocolICMP && t.notAnswering(span) {
				p.NotAnswering = true
				at.Protocols = append(at.Protocols, p)
				continue
			}
			rtts = rtts[:0]
			for i, w := range ps.flows {
				var st api.Stats
				st, rtts = w.stats(since, rtts)
				p.Sent += st.Sent
				p.Lost += st.Lost
				p.Errors += st.Errors
				p.PathMTU = api.MinPathMTU(p.PathMTU, st.PathMTU)
				switch proto {
				case probe.ProtocolTCPSYN:
					p.Flows = append(p.Flows, api.Flow{SourcePort: t.ports[i], Stats: st, Path: a.paths.flowPath(t.key(), t.ports[i], now)})
				case probe.ProtocolTCPSYNMTU: // its path is its tcp_syn flow's, by source port
					p.Flows = append(p.Flows, api.Flow{SourcePort: t.ports[i], Stats: st})
				default:
					p.LastResult = st.LastResult
				}
			}
			finish(&p.Stats, rtts)
			at.Protocols = append(at.Protocols, p)
		}
		t.mu.Unlock()
		obs.Targets = append(obs.Targets, at)
	}
	return obs
}

// serverLimits bound what clients can hold of the agent's HTTP server
// (issue 15: 1,100 idle h2c connections cut off /healthz when Accept
// waited behind a global cap, and stalled streams held a response each).
// Each peer agent holds a connection for its PINGs, the matrix and
// Prometheus one or two: 64 a source leaves room for many agents behind
// one SNAT address. A peer's PINGs count as traffic, so QuietNew must
// exceed the probing interval (New makes it at least 3 intervals);
// HTTP/2's own idle timeout ignores PINGs and is a day
// (probe/h2responder.go), so Quiet is the overall one.
func serverLimits() httpguard.Limits {
	return httpguard.Limits{
		ConnsPerSource:    64,
		Conns:             1024,
		RequestsPerSource: 8,
		Requests:          256,
		QuietNew:          10 * time.Second,
		Quiet:             2 * time.Minute,
		Sweep:             time.Second,
	}
}
