package httpguard

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	dto "github.com/prometheus/client_model/go"
)

// Limits bound what clients can hold of a server. They are not
// configuration: each server picks its own, and tests change them to
// watch them act.
type Limits struct {
	// ConnsPerSource caps the connections held from one source address.
	ConnsPerSource int
	// Conns caps the connections held in all. At the cap a new connection
	// closes the quietest one without a request in flight (the oldest last
	// read), so a flood of idle connections cannot keep a legitimate
	// client out; Accept never waits.
	Conns int
	// RequestsPerSource caps the requests in flight from one source.
	RequestsPerSource int
	// Requests caps the requests in flight in all, not counting each
	// source's first: a source with nothing in flight (a kubelet's
	// /healthz, Prometheus, an operator's page) is always served, however
	// many requests others hold.
	Requests int
	// QuietNew closes a connection that has never carried a request once
	// its client sent nothing for that long.
	QuietNew time.Duration
	// Quiet closes any connection without a request in flight once its
	// client sent nothing for that long.
	Quiet time.Duration
	// Sweep is how often quiet connections are looked for.
	Sweep time.Duration
}

// Guard is a server's listener: it admits connections within the limits,
// tracks each one's last read and requests in flight, closes quiet ones
// (Run) and hands out request slots (Limit). Put it in the http.Server as
// its listener and its ConnContext.
type Guard struct {
	net.Listener
	// Lim are the limits in force; tests may change them before traffic.
	Lim   Limits
	m     *metrics
	start time.Time // the clock of conn.lastRead

	mu       sync.Mutex
	conns    map[*conn]struct{}
	sources  map[netip.Addr]*sourceUse
	requests int // slots taken beyond the sources' first requests
}

type sourceUse struct{ conns, requests int }

// New guards ln with lim, registering its metrics on reg; server names
// the server in their help ("the agent's", "the matrix's").
func New(ln net.Listener, lim Limits, reg prometheus.Registerer, server string) *Guard {
	g := &Guard{
		Listener: ln,
		Lim:      lim,
		start:    time.Now(),
		conns:    map[*conn]struct{}{},
		sources:  map[netip.Addr]*sourceUse{},
	}
	g.m = newMetrics(reg, g, server)
	return g
}

func (g *Guard) clock() int64 { return int64(time.Since(g.start)) }

// Accept returns the next connection within the limits and closes the
// others at once, so a flood never makes a legitimate client wait.
func (g *Guard) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		gc, victim, reason := g.admit(c)
		if victim != nil {
			victim.Conn.Close()
			g.m.closed.WithLabelValues("evicted").Inc()
		}
		if gc == nil {
			c.Close()
			g.m.refused.WithLabelValues(reason).Inc()
			continue
		}
		return gc, nil
	}
}

func (g *Guard) admit(c net.Conn) (gc *conn, victim *conn, reason string) {
	var src netip.Addr
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		src = a.AddrPort().Addr().Unmap()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sources[src]
	if s != nil && s.conns >= g.Lim.ConnsPerSource {
		return nil, nil, "per_source"
	}
	if len(g.conns) >= g.Lim.Conns {
		var oldest int64
		for c := range g.conns {
			if c.inflight.Load() == 0 && (victim == nil || c.lastRead.Load() < oldest) {
				victim, oldest = c, c.lastRead.Load()
			}
		}
		if victim == nil {
			return nil, nil, "full"
		}
		victim.closeOnce.Do(func() { g.removeLocked(victim) })
	}
	if s == nil {
		s = &sourceUse{}
		g.sources[src] = s
	}
	s.conns++
	gc = &conn{Conn: c, g: g, src: src}
	gc.lastRead.Store(g.clock())
	g.conns[gc] = struct{}{}
	return gc, victim, ""
}

func (g *Guard) removeLocked(c *conn) {
	delete(g.conns, c)
	if s := g.sources[c.src]; s != nil {
		s.conns--
		if s.conns == 0 && s.requests == 0 {
			delete(g.sources, c.src)
		}
	}
}

// Run closes quiet connections until ctx is done.
func (g *Guard) Run(ctx context.Context) error {
	tick := time.NewTicker(g.Lim.Sweep)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now := g.clock()
		var quiet []*conn
		g.mu.Lock()
		for c := range g.conns {
			limit := g.Lim.QuietNew
			if c.requested.Load() {
				limit = g.Lim.Quiet
			}
			if c.inflight.Load() == 0 && time.Duration(now-c.lastRead.Load()) >= limit {
				quiet = append(quiet, c)
			}
		}
		g.mu.Unlock()
		for _, c := range quiet {
			c.Close()
		}
		g.m.closed.WithLabelValues("quiet").Add(float64(len(quiet)))
	}
}

// ConnContext puts the guarded connection in every request's context for
// Limit (the http.Server's ConnContext).
func (g *Guard) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*conn); ok {
		return context.WithValue(ctx, connKey{}, gc)
	}
	return ctx
}

type connKey struct{}

// Limit serves a request if its source and the server have a slot for it,
// else answers 503 at once. The 503 has no body: HTTP/2 flow control
// holds even a few bytes from a client that does not read, and the
// handler with them.
func (g *Guard) Limit(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(connKey{}).(*conn)
		if c == nil {
			h.ServeHTTP(w, r)
			return
		}
		shared, reason := g.acquire(c)
		if reason != "" {
			g.m.requestsRefused.WithLabelValues(reason).Inc()
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		defer g.release(c, shared)
		h.ServeHTTP(w, r)
		if r.ProtoMajor == 2 {
			// x/net's server flushes what the handler left in its buffer
			// (4 KiB) only after the handler returns: flushing here keeps
			// the slot until a client that does not read has the body.
			http.NewResponseController(w).Flush()
		}
	})
}

// acquire takes a request slot of c's source, and one of the server's
// shared ones unless it is the source's only request in flight.
func (g *Guard) acquire(c *conn) (shared bool, reason string) {
	c.requested.Store(true)
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sources[c.src]
	if s == nil { // the connection was closed under the request
		s = &sourceUse{}
		g.sources[c.src] = s
	}
	switch {
	case s.requests >= g.Lim.RequestsPerSource:
		reason = "per_source"
	case s.requests > 0 && g.requests >= g.Lim.Requests:
		reason = "full"
	}
	if reason != "" {
		if s.conns == 0 && s.requests == 0 {
			delete(g.sources, c.src)
		}
		return false, reason
	}
	shared = s.requests > 0
	s.requests++
	if shared {
		g.requests++
	}
	c.inflight.Add(1)
	return shared, ""
}

func (g *Guard) release(c *conn, shared bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c.inflight.Add(-1)
	c.lastRead.Store(g.clock()) // quiet counts from the end of the request
	if shared {
		g.requests--
	}
	if s := g.sources[c.src]; s != nil {
		s.requests--
		if s.conns == 0 && s.requests == 0 {
			delete(g.sources, c.src)
		}
	}
}

// Open is the number of connections held.
func (g *Guard) Open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns)
}

// InFlight is the number of requests being served.
func (g *Guard) InFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, s := range g.sources {
		n += s.requests
	}
	return n
}

// Stats are what the guard refused and closed so far, as its metrics
// count them.
type Stats struct {
	// Connections closed on accept, by reason.
	RefusedPerSource, RefusedFull int
	// Held connections closed, by reason.
	Evicted, Quiet int
	// Requests answered 503, by reason.
	RequestsPerSource, RequestsFull int
}

// Stats returns the counts so far.
func (g *Guard) Stats() Stats {
	n := func(v *prometheus.CounterVec, reason string) int {
		var m dto.Metric
		v.WithLabelValues(reason).Write(&m)
		return int(m.GetCounter().GetValue())
	}
	return Stats{
		RefusedPerSource: n(g.m.refused, "per_source"), RefusedFull: n(g.m.refused, "full"),
		Evicted: n(g.m.closed, "evicted"), Quiet: n(g.m.closed, "quiet"),
		RequestsPerSource: n(g.m.requestsRefused, "per_source"), RequestsFull: n(g.m.requestsRefused, "full"),
	}
}

// conn is an accepted connection as Guard tracks it.
type conn struct {
	net.Conn
	g         *Guard
	src       netip.Addr
	lastRead  atomic.Int64 // g.clock() when the client last sent bytes
	inflight  atomic.Int32 // requests being served
	requested atomic.Bool  // it has carried a request
	closeOnce sync.Once
}

func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.lastRead.Store(c.g.clock())
	}
	return n, err
}

func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.g.mu.Lock()
		c.g.removeLocked(c)
		c.g.mu.Unlock()
	})
	return c.Conn.Close()
}

type metrics struct {
	refused, closed, requestsRefused *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, g *Guard, server string) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		refused: f.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_http_connections_refused_total",
			Help: "Connections to " + server + " HTTP server closed on accept: per_source (the source address holds its share) or full (every connection has a request in flight).",
		}, []string{"reason"}),
		closed: f.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_http_connections_closed_total",
			Help: "Held connections " + server + " HTTP server closed: evicted (the quietest, for a new one at the cap) or quiet (the client sent nothing for too long).",
		}, []string{"reason"}),
		requestsRefused: f.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_http_requests_refused_total",
			Help: "Requests answered 503 at once: per_source (the source has its share in flight) or full (the server's shared slots are taken).",
		}, []string{"reason"}),
	}
	for _, r := range []string{"per_source", "full"} {
		m.refused.WithLabelValues(r)
		m.requestsRefused.WithLabelValues(r)
	}
	for _, r := range []string{"evicted", "quiet"} {
		m.closed.WithLabelValues(r)
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "prober_http_connections",
		Help: "Connections " + server + " HTTP server holds.",
	}, func() float64 { return float64(g.Open()) })
	return m
}
