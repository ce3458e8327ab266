package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/probe"
)

// HTTP2 is how a target is pinged over HTTP/2 (http2_ping).
type HTTP2 struct {
	// Mode is api.HTTP2H2C, HTTP2TLS or HTTP2None; "" is the target
	// class's default (api.DefaultHTTP2).
	Mode               string
	CAFile, ServerName string
	InsecureSkipVerify bool
}

// responderConfig is the HTTP server's configuration: TLS when the tls
// block is set, else HTTP/1.1 and h2c on the listen address.
func (a *Agent) responderConfig() probe.ResponderConfig {
	rc := a.cfg.Server
	rc.Logger = a.log
	return rc
}

// serve serves the listener until Shutdown, which makes it return nil.
func (a *Agent) serve() error {
	var err error
	if a.cfg.Server.TLS != nil { // not srv.TLSConfig: http2.ConfigureServer sets one either way
		err = a.srv.ServeTLS(a.ln, "", "")
	} else {
		err = a.srv.Serve(a.ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("http serve: %w", err)
}

// h2Target is one target's HTTP/2 pinger, its reset counters and the
// state of its established-flow black-hole detector.
type h2Target struct {
	pinger *probe.HTTP2Pinger
	// resets and seen are only touched by the target's http2_ping loop.
	resets map[string]prometheus.Counter // by reason
	seen   map[string]uint64             // pinger.Resets() after the last Ping

	// Guarded by target.mu.
	lostInRow      int       // PINGs lost in a row
	answeredAt     time.Time // last PING answered (or refused); the evidence span starts here
	blackholeUntil time.Time // the black hole is reported until then
}

// newH2Target makes the pinger of a target probed over HTTP/2, or
// returns nil if it is not (http2_ping off, or the target's mode none).
// The pinger dials nothing until its first Ping.
func (a *Agent) newH2Target(tg Target, path string) (*h2Target, error) {
	pinger, err := newPinger(a.cfg, tg, a.log)
	if pinger == nil || err != nil {
		return nil, err
	}
	h := &h2Target{pinger: pinger, resets: map[string]prometheus.Counter{}, seen: pinger.Resets(), answeredAt: a.now()}
	for reason := range h.seen {
		h.resets[reason] = a.http2.resets.WithLabelValues(a.http2.labels(path, tg.Family(), tg.Name, reason)...)
	}
	return h, nil
}

// newPinger makes tg's HTTP/2 pinger from the config's (Config.HTTP2)
// and tg's own fields, or returns nil if tg is not probed over HTTP/2. It
// dials nothing, and reads tg's CA file. tg's mode was checked when it
// was made (targetsFromPeers).
func newPinger(cfg Config, tg Target, log *slog.Logger) (*probe.HTTP2Pinger, error) {
	if !slices.Contains(cfg.Protocols, probe.ProtocolHTTP2Ping) {
		return nil, nil
	}
	mode := cmp.Or(tg.HTTP2.Mode, api.DefaultHTTP2(tg.Class))
	if mode == api.HTTP2None {
		return nil, nil
	}
	hc := cfg.HTTP2
	hc.TLS = mode == api.HTTP2TLS
	hc.ServerName, hc.CAFile, hc.InsecureSkipVerify = tg.HTTP2.ServerName, tg.HTTP2.CAFile, tg.HTTP2.InsecureSkipVerify
	hc.Logger = log
	pinger, err := probe.NewHTTP2Pinger(probe.Target{Addr: tg.Addr, Port: tg.Port}, hc)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", tg.Name, err)
	}
	return pinger, nil
}

// pingHTTP2 sends one PING to t, counts the connection resets it caused
// and feeds the black-hole detector.
func (a *Agent) pingHTTP2(ctx context.Context, t *target) probe.Result {
	h := t.h2
	r := h.pinger.Ping(ctx)
	timedOut := false
	for reason, n := range h.pinger.Resets() {
		if d := n - h.seen[reason]; d > 0 {
			h.resets[reason].Add(float64(d))
			timedOut = timedOut || reason == probe.ResetPingTimeout.String()
		}
		h.seen[reason] = n
	}
	now := a.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	switch r.Outcome {
	case probe.OK, probe.Refused:
		h.lostInRow, h.answeredAt = 0, now
		return r
	case probe.Lost:
		h.lostInRow++
	default: // nothing was sent (backoff, cancelled)
		return r
	}
	since := h.answeredAt
	if oldest := now.Add(-a.cfg.Window); since.Before(oldest) {
		since = oldest
	}
	ev := blackholeEvidence{
		PingTimeout: timedOut,
		LostInRow:   h.lostInRow,
		DeadAfter:   a.cfg.HTTP2.DeadAfter,
		Syn:         t.synOutcomes(since),
	}
	if establishedBlackhole(ev) {
		if !now.Before(h.blackholeUntil) {
			a.log.Warn("established flow black hole", "peer", t.Name, "path", t.path,
				"lost_pings", h.lostInRow, "syn_ok", ev.Syn.OK, "syn_lost", ev.Syn.Lost, "syn_refused", ev.Syn.Refused)
		}
		h.blackholeUntil = now.Add(a.cfg.Window)
	}
	return r
}

// stopHTTP2 closes a departed target's pinger and deletes its series.
func (a *Agent) stopHTTP2(t *target) {
	if t.h2 == nil {
		return
	}
	t.h2.pinger.Close()
	if a.http2.perTarget {
		a.http2.resets.DeletePartialMatch(prometheus.Labels{"target": t.Name, "family": t.Family()})
	}
}

// closePingers closes every target's HTTP/2 connection at shutdown, so
// the peers see it end now rather than at process exit.
func (a *Agent) closePingers() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.targets {
		if t.h2 != nil {
			t.h2.pinger.Close()
		}
	}
}

// http2Metrics are the series of http2_ping beyond the common probe
// counters.
type http2Metrics struct {
	perTarget bool
	resets    *prometheus.CounterVec
}

func newHTTP2Metrics(reg prometheus.Registerer, perTarget bool, a *Agent) *http2Metrics {
	labels := []string{"path", "family", "reason"}
	if perTarget {
		labels = []string{"path", "family", "target", "reason"}
	}
	m := &http2Metrics{
		perTarget: perTarget,
		resets: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "prober_http2_connection_resets_total",
			Help: "HTTP/2 probe connections lost (ping_timeout, reset, goaway) or turned down at dial (refused, tls), by path class, target and reason.",
		}, labels),
	}
	reg.MustRegister(newBlackholeCollector(a, perTarget))
	return m
}

func (m *http2Metrics) labels(path, family, target, reason string) []string {
	if m.perTarget {
		return []string{path, family, target, reason}
	}
	return []string{path, family, reason}
}
