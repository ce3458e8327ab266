package agent

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
)

// serverLimits bound what clients can hold of the agent's HTTP server
// (issue 15: 1,100 idle h2c connections cut off /healthz when Accept
// waited behind a global cap, and stalled streams held a response each).
// They are not configuration: tests change them to watch them act.
type serverLimits struct {
	// connsPerSource caps the connections held from one source address.
	// Each peer agent holds one for its PINGs, the matrix and Prometheus
	// one or two; 64 leaves room for many agents behind one SNAT address.
	connsPerSource int
	// conns caps the connections held in all. At the cap a new connection
	// closes the quietest one without a request in flight (the oldest last
	// read), so a flood of idle connections cannot keep the kubelet out;
	// Accept never waits.
	conns int
	// requestsPerSource caps the requests in flight from one source.
	requestsPerSource int
	// requests caps the requests in flight in all, not counting each
	// source's first: a source with nothing in flight (the kubelet's
	// /healthz, Prometheus, the matrix) is always served, however many
	// requests others hold.
	requests int
	// quietNew closes a connection that has never carried a request once
	// its client sent nothing for that long. A peer's PINGs count as
	// traffic, so it must exceed the probing interval (New makes it at
	// least 3 intervals).
	quietNew time.Duration
	// quiet closes any connection without a request in flight once its
	// client sent nothing for that long: HTTP/2's own idle timeout ignores
	// PINGs and is a day (probe/h2responder.go), so this is the overall one.
	quiet time.Duration
	sweep time.Duration // how often quiet connections are looked for
}

var defaultServerLimits = serverLimits{
	connsPerSource:    64,
	conns:             1024,
	requestsPerSource: 8,
	requests:          256,
	quietNew:          10 * time.Second,
	quiet:             2 * time.Minute,
	sweep:             time.Second,
}

// connGuard is the agent's listener: it admits connections within the
// limits, tracks each one's last read and requests in flight, closes
// quiet ones (run) and hands out request slots (limit).
type connGuard struct {
	net.Listener
	lim   serverLimits
	m     *connMetrics
	start time.Time // the clock of guardedConn.lastRead

	mu       sync.Mutex
	conns    map[*guardedConn]struct{}
	sources  map[netip.Addr]*sourceUse
	requests int // slots taken beyond the sources' first requests
}

type sourceUse struct{ conns, requests int }

func newConnGuard(ln net.Listener, lim serverLimits, reg prometheus.Registerer) *connGuard {
	g := &connGuard{
		Listener: ln,
		lim:      lim,
		start:    time.Now(),
		conns:    map[*guardedConn]struct{}{},
		sources:  map[netip.Addr]*sourceUse{},
	}
	g.m = newConnMetrics(reg, g)
	return g
}

func (g *connGuard) clock() int64 { return int64(time.Since(g.start)) }

// Accept returns the next connection within the limits and closes the
// others at once, so a flood never makes a legitimate client wait.
func (g *connGuard) Accept() (net.Conn, error) {
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

func (g *connGuard) admit(c net.Conn) (gc *guardedConn, victim *guardedConn, reason string) {
	var src netip.Addr
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		src = a.AddrPort().Addr().Unmap()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sources[src]
	if s != nil && s.conns >= g.lim.connsPerSource {
		return nil, nil, "per_source"
	}
	if len(g.conns) >= g.lim.conns {
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
	gc = &guardedConn{Conn: c, g: g, src: src}
	gc.lastRead.Store(g.clock())
	g.conns[gc] = struct{}{}
	return gc, victim, ""
}

func (g *connGuard) removeLocked(c *guardedConn) {
	delete(g.conns, c)
	if s := g.sources[c.src]; s != nil {
		s.conns--
		if s.conns == 0 && s.requests == 0 {
			delete(g.sources, c.src)
		}
	}
}

// run closes quiet connections until ctx is done.
func (g *connGuard) run(ctx context.Context) error {
	tick := time.NewTicker(g.lim.sweep)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now := g.clock()
		var quiet []*guardedConn
		g.mu.Lock()
		for c := range g.conns {
			limit := g.lim.quietNew
			if c.requested.Load() {
				limit = g.lim.quiet
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

// connContext puts the guarded connection in every request's context for
// limit (ConnContext of the http.Server).
func (g *connGuard) connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*guardedConn); ok {
		return context.WithValue(ctx, connKey{}, gc)
	}
	return ctx
}

type connKey struct{}

// limit serves a request if its source and the server have a slot for it,
// else answers 503 at once. The 503 has no body: HTTP/2 flow control
// holds even a few bytes from a client that does not read, and the
// handler with them.
func (g *connGuard) limit(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(connKey{}).(*guardedConn)
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
func (g *connGuard) acquire(c *guardedConn) (shared bool, reason string) {
	c.requested.Store(true)
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sources[c.src]
	if s == nil { // the connection was closed under the request
		s = &sourceUse{}
		g.sources[c.src] = s
	}
	switch {
	case s.requests >= g.lim.requestsPerSource:
		reason = "per_source"
	case s.requests > 0 && g.requests >= g.lim.requests:
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

func (g *connGuard) release(c *guardedConn, shared bool) {
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

// open is the number of connections held.
func (g *connGuard) open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns)
}

// inFlight is the number of requests being served.
func (g *connGuard) inFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, s := range g.sources {
		n += s.requests
	}
	return n
}

// guardedConn is an accepted connection as connGuard tracks it.
type guardedConn struct {
	net.Conn
	g         *connGuard
	src       netip.Addr
	lastRead  atomic.Int64 // g.clock() when the client last sent bytes
	inflight  atomic.Int32 // requests being served
	requested atomic.Bool  // it has carried a request
	closeOnce sync.Once
}

func (c *guardedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.lastRead.Store(c.g.clock())
	}
	return n, err
}

func (c *guardedConn) Close() error {
	c.closeOnce.Do(func() {
		c.g.mu.Lock()
		c.g.removeLocked(c)
		c.g.mu.Unlock()
	})
	return c.Conn.Close()
}

type connMetrics struct {
	refused, closed, requestsRefused *prometheus.CounterVec
}

func newConnMetrics(reg prometheus.Registerer, g *connGuard) *connMetrics {
	f := promauto.With(reg)
	m := &connMetrics{
		refused: f.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_http_connections_refused_total",
			Help: "Connections to the agent's HTTP server closed on accept: per_source (the source address holds its share) or full (every connection has a request in flight).",
		}, []string{"reason"}),
		closed: f.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_http_connections_closed_total",
			Help: "Held connections the agent's HTTP server closed: evicted (the quietest, for a new one at the cap) or quiet (the client sent nothing for too long).",
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
		Help: "Connections the agent's HTTP server holds.",
	}, func() float64 { return float64(g.open()) })
	return m
}
