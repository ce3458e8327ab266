package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/httpguard"
	"github.com/netprober/prober/probe"
)

// Target is a peer to probe, from the static config or from discovery.
type Target struct {
	Name   string
	Addr   netip.Addr
	Class  string // node | pod | lb
	Port   uint16
	Labels map[string]string
	HTTP2  HTTP2
	// Backends names the node and pod targets behind an lb target (its
	// Service's ready endpoints), reported for the matrix's LB rule.
	Backends []string
	// DNS is the name dns probes ask the target on Port; "" for no DNS
	// probe. DNSOnly: no other probe (api.DNSQuestion.Only).
	DNS     string
	DNSOnly bool
}

// Family is the target's address family: a dual-stack peer is two
// targets under one name, one per family.
func (t Target) Family() string { return api.FamilyOf(t.Addr) }

func (t Target) key() targetKey { return targetKey{t.Name, t.Family()} }

// targetKey identifies a probed target: its name and family.
type targetKey struct{ name, family string }

// engines are the probe engines of one address family, each nil when its
// protocol is not probed.
type engines struct {
	src  netip.Addr
	icmp *probe.ICMP
	syn  *probe.TCPSYN
}

// Agent is the per-node prober process: it probes its targets, keeps the
// results in sliding windows and serves them.
type Agent struct {
	cfg Config
	log *slog.Logger
	src netip.Addr // the first source: the agent's address
	// addrs are every source as observations report them, nil for a
	// single-stack agent.
	addrs []string
	reg   *prometheus.Registry
	m     *metrics
	http2 *http2Metrics
	// reported are the protocols probed, as observations name them, in
	// the config's order (dns: dns_udp, dns_tcp).
	reported []probe.Protocol
	// fams are the engines of each family the agent has a source of.
	fams    map[string]*engines
	paths   *paths // nil when tracing is off (paths.go)
	limiter *rate.Limiter
	sem     chan struct{} // bounds probes in flight
	sched   *scheduler
	ln      net.Listener
	conns   *httpguard.Guard // a.ln, the listener as the server sees it
	srv     *http.Server
	// gen changes with the targets or labels: shared responses (shared.go)
	// made before are not served again.
	gen atomic.Uint64
	now func() time.Time
	// lbSettle is the package's constant; tests shorten it.
	lbSettle time.Duration

	// routes looks up the routes that say the first hop (firsthop.go);
	// hopKick asks for a lookup when the targets change. ifAddrs lists
	// the host's interface addresses (hostaddrs.go).
	routes routeLookup
	// routeMTU is the MTU of the interface towards a target: the size of
	// its large probes unless probing.pmtu.size says (pmtu_linux.go).
	routeMTU func(src, dst netip.Addr) int
	ifAddrs  func() ([]net.Addr, error)
	hopKick  chan struct{}

	// pull guards the observations when the matrix plans (pullkey.go).
	pull pullKey

	mu        sync.Mutex
	targets   map[targetKey]*target
	labels    map[string]string // its own, reported in observations
	firstHop  netip.Addr        // its first-hop router, invalid when unknown
	hostAddrs []string          // a node agent's host addresses (hostaddrs.go)
	probeWG   sync.WaitGroup
}

// Check runs every check of cfg that New runs before it opens anything:
// the probe engines' own checks of the configs config built for them
// (TCPSYN, Tracing.Trace, HTTP2) and each static target's HTTP/2 pinger.
// A config built from a file config.Agent.Validate passed passes it;
// config's parity test holds the two to that.
func Check(cfg Config) error {
	var errs []error
	if slices.Contains(cfg.Protocols, probe.ProtocolTCPSYN) {
		for _, src := range cfg.Sources {
			sc := cfg.TCPSYN
			sc.Source = src
			if err := sc.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("tcp_syn: %w", err))
			}
		}
		if cfg.Tracing.On {
			if err := cfg.Tracing.Trace.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("trace: %w", err))
			}
		}
	}
	if slices.Contains(cfg.Protocols, probe.ProtocolHTTP2Ping) {
		if err := cfg.HTTP2.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("http2_ping: %w", err))
		}
	}
	for _, tg := range cfg.Targets {
		pinger, err := newPinger(cfg, tg, nil)
		if err != nil {
			errs = append(errs, err)
		} else if pinger != nil {
			pinger.Close()
		}
	}
	return errors.Join(errs...)
}

// New opens every socket the agent needs (probe sockets, the listener), so
// a missing privilege or a taken port fails here, before anything starts.
// It runs Check first.
func New(cfg Config, logger *slog.Logger) (_ *Agent, err error) {
	if err := Check(cfg); err != nil {
		return nil, err
	}
	a := &Agent{
		cfg:      cfg,
		log:      logger,
		src:      firstSource(cfg.Sources),
		reg:      prometheus.NewRegistry(),
		targets:  map[targetKey]*target{},
		fams:     map[string]*engines{},
		labels:   maps.Clone(cfg.Labels),
		now:      time.Now,
		lbSettle: lbSettle,
		routes:   firstHopRoutes,
		routeMTU: routeMTU,
		ifAddrs:  net.InterfaceAddrs,
		hopKick:  make(chan struct{}, 1),
	}
	// An agent the matrix plans for serves its observations to the matrix
	// alone (pullkey.go).
	a.pull.required.Store(cfg.Planned)
	for _, proto := range cfg.Protocols {
		a.reported = append(a.reported, reportedAs(proto)...)
	}
	if cfg.PMTU.Every > 0 {
		a.reported = append(a.reported, probe.ProtocolTCPSYNMTU)
	}
	burst := max(1, int(cfg.MaxProbesPerSecond/5)) // two of the scheduler's bursts (schedule.go)
	a.limiter = rate.NewLimiter(rate.Limit(cfg.MaxProbesPerSecond), burst)
	a.sem = make(chan struct{}, max(16, int(cfg.MaxProbesPerSecond*cfg.Timeout.Seconds())+1))
	a.sched = newScheduler(a)
	a.m = newMetrics(a.reg, cfg.PerTarget)
	a.http2 = newHTTP2Metrics(a.reg, cfg.PerTarget, a)
	defer func() {
		if err != nil {
			a.closeEngines()
		}
	}()
	if err := a.openEngines(); err != nil {
		return nil, err
	}
	if a.paths, err = newPaths(a); err != nil {
		return nil, err
	}
	var lns []net.Listener
	for _, addr := range cfg.Listen {
		if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Port() == 0 && len(lns) > 0 {
			// Port 0 (tests): every address on the port the first got.
			addr = netip.AddrPortFrom(ap.Addr(), uint16(lns[0].Addr().(*net.TCPAddr).Port)).String()
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		lns = append(lns, ln)
	}
	a.ln = httpguard.Merge(lns...)
	lim := serverLimits()
	lim.QuietNew = max(lim.QuietNew, 3*cfg.Interval) // peers' PINGs keep their connections
	lim.Quiet = max(lim.Quiet, 3*cfg.Interval)
	a.conns = httpguard.New(a.ln, lim, a.reg, "the agent's")
	a.ln = a.conns
	if a.srv, err = a.newServer(); err != nil {
		return nil, err
	}
	return a, nil
}

// firstSource is the agent's address: its first source, invalid when it
// has none.
func firstSource(srcs []netip.Addr) netip.Addr {
	if len(srcs) > 0 {
		return srcs[0]
	}
	return netip.Addr{}
}

// Registry is the agent's own metrics registry.
func (a *Agent) Registry() *prometheus.Registry { return a.reg }

// Addr is the address the HTTP endpoints listen on.
func (a *Agent) Addr() net.Addr { return a.ln.Addr() }

// Run probes the configured targets and serves HTTP until ctx is cancelled,
// then stops the probes, shuts the server down and returns nil.
func (a *Agent) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, e := range a.fams {
		if e.icmp != nil {
			g.Go(func() error { return e.icmp.Run(gctx) })
		}
		if e.syn != nil {
			g.Go(func() error { return e.syn.Run(gctx) })
		}
	}
	if a.paths != nil {
		g.Go(func() error { return a.paths.run(gctx) })
	}
	g.Go(func() error { return a.runFirstHop(gctx) })
	// The scheduler alone starts probes (probeWG.Add): stopProbes waits
	// for it to return first, since an Add racing the Wait is misuse.
	schedDone := make(chan struct{})
	g.Go(func() error { defer close(schedDone); return a.sched.run(gctx) })
	g.Go(a.serve)
	g.Go(func() error { return a.conns.Run(gctx) })
	g.Go(func() error {
		<-gctx.Done()
		<-schedDone
		a.stopProbes()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := a.srv.Shutdown(sctx)
		a.closeEngines()
		return err
	})
	// Only a static set is applied here: with discovery the caller feeds
	// SetTargets, and an empty set applied now could land after, and wipe,
	// discovery's first snapshot.
	if len(a.cfg.Targets) > 0 {
		if err := a.SetTargets(gctx, a.cfg.Targets); err != nil {
			a.log.Error("targets", "err", err)
		}
	}
	a.log.Info("agent started", "name", a.cfg.Name, "class", a.cfg.Class, "listen", a.ln.Addr().String(),
		"source", a.cfg.Sources, "targets", len(a.cfg.Targets), "protocols", a.cfg.Protocols)
	err := g.Wait()
	if ctx.Err() != nil && err == nil {
		a.log.Info("agent stopped")
	}
	return err
}

// openEngines opens the engines of every probed protocol for each
// source's family.
func (a *Agent) openEngines() error {
	protos := a.cfg.Protocols
	unmatched := map[probe.Protocol][]*probe.Unmatched{}
	srcs := a.cfg.Sources
	for _, src := range srcs {
		if len(srcs) > 1 {
			a.addrs = append(a.addrs, src.String())
		}
		e := &engines{src: src}
		a.fams[api.FamilyOf(src)] = e
		var err error
		if slices.Contains(protos, probe.ProtocolICMP) {
			if e.icmp, err = probe.NewICMP(src, a.log); err != nil {
				return err
			}
			unmatched[probe.ProtocolICMP] = append(unmatched[probe.ProtocolICMP], &e.icmp.Unmatched)
		}
		if slices.Contains(protos, probe.ProtocolTCPSYN) {
			sc := a.cfg.TCPSYN
			sc.Source, sc.Logger = src, a.log
			if e.syn, err = probe.NewTCPSYN(sc); err != nil {
				return err
			}
			unmatched[probe.ProtocolTCPSYN] = append(unmatched[probe.ProtocolTCPSYN], &e.syn.Unmatched)
		}
	}
	a.reg.MustRegister(newUnmatchedCollector(unmatched))
	if slices.Contains(protos, probe.ProtocolICMP) {
		a.reg.MustRegister(newNotAnsweringCollector(a, a.cfg.PerTarget))
	}
	return nil
}

func (a *Agent) closeEngines() {
	for _, e := range a.fams {
		if e.icmp != nil {
			e.icmp.Close()
		}
		if e.syn != nil {
			e.syn.Close()
		}
	}
	a.paths.close()
	if a.ln != nil {
		a.ln.Close()
	}
}

// stopProbes cancels every target, waits for its probes to end and
// closes its HTTP/2 connection.
func (a *Agent) stopProbes() {
	a.mu.Lock()
	for _, t := range a.targets {
		t.cancel()
	}
	a.mu.Unlock()
	a.probeWG.Wait()
	a.closePingers()
}

// dnsQuery is the name a target's dns block asks, "" without one.
func dnsQuery(q *api.DNSQuestion) string {
	switch {
	case q == nil:
		return ""
	case q.Query == "":
		return probe.DefaultDNSQuery
	}
	return q.Query
}
