package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/auth"
	"github.com/netprober/prober/buildinfo"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/httpguard"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/tlsfiles"
)

// Hub runs the matrix process.
type Hub struct {
	cfg    *config.Matrix
	log    *slog.Logger
	client *http.Client
	reg    *prometheus.Registry
	met    *hubMetrics
	ln     net.Listener
	srv    *http.Server
	// tls: srv serves TLS. Not srv.TLSConfig, which net/http sets for
	// HTTP/2 once serving starts, TLS or not.
	tls bool
	now func() time.Time
	// diagnosed is Options.Diagnosed.
	diagnosed func(matrix.Diagnosis)

	mu     sync.Mutex
	m      *matrix.Matrix
	snap   matrix.Snapshot
	diag   matrix.Diagnosis
	fabric matrix.Fabric
	focus  *matrix.Focus // the view the page opens on
	hist   history
	agents []string            // base URLs pulled each round
	names  map[string]string   // agent name by URL, from discovery
	pods   map[string]agentPod // agent pod by agent name, from discovery
	auth   *agentAuth          // nil without discovery: kubernetes
	pulls  map[string]*pull    // by agent URL
	// owner is the URL each agent name's accepted reports come from, and
	// owned its reverse: a name never moves to another address while
	// its address is listed.
	owner  map[string]string
	owned  map[string]string
	plan   planState
	rounds atomic.Uint64
	// gen changes with every round and agent list: the cached
	// responses are of one generation.
	gen                                           atomic.Uint64
	matrixJSON, diagJSON, fabricJSON, metricsText encoded
	planJSON                                      encoded          // generations: plan rebuilds
	guard                                         *httpguard.Guard // h.ln, the listener as the server sees it
	traces                                        tracing
	cross                                         crossings
}

// maxBody bounds one agent's observations; a response larger than this is
// an error, not a memory spike. A report at api's bounds with every flow
// traced is about 4 MiB.
const maxBody = 16 << 20

// Options are the hub's dependencies beyond its config.
type Options struct {
	// Transport carries the pulls; nil uses a direct (never proxied)
	// transport. The lab passes one that dials inside a namespace.
	Transport http.RoundTripper
	// SigningKeys fetches the API server's ServiceAccount signing keys,
	// with which the matrix verifies the agents' tokens (discovery:
	// kubernetes with agentAuth: token; peers.Discovery.SigningKeys).
	SigningKeys func(context.Context) (*auth.Keys, error)
	// Diagnosed, when set, is handed each round's diagnosis, outside the
	// hub's lock; it must not block (peers.Reporter.Observe).
	Diagnosed func(matrix.Diagnosis)
	// KubeWrites, when set, visits the writes the matrix made to the API
	// server by object and result, and returns the changes its bound
	// holds back (peers.Reporter.Writes): exported as metrics.
	KubeWrites func(visit func(object, result string, n uint64)) (held int)
}

// Check runs every check of cfg that New runs before it opens anything:
// matrix.New's, on the matrix.Config that config builds. A config that
// config.Matrix.Validate passed passes it; config's parity test holds the
// two to that.
func Check(cfg *config.Matrix) error {
	_, err := matrix.New(cfg.MatrixConfig())
	return err
}

// New builds the matrix and opens the listener: a bad config or a taken
// port fails here, before anything runs.
func New(cfg *config.Matrix, logger *slog.Logger, opts Options) (*Hub, error) {
	m, err := matrix.New(cfg.MatrixConfig())
	if err != nil {
		return nil, err
	}
	h := &Hub{
		cfg: cfg, log: logger, m: m, now: time.Now,
		reg:   prometheus.NewRegistry(),
		pulls: map[string]*pull{},
		owner: map[string]string{},
		cross: crossings{once: make(chan struct{}, 1)},
		owned: map[string]string{},
		client: &http.Client{Timeout: cfg.Timeout.D(), Transport: opts.Transport,
			// An agent that redirects is answering for another address.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
	if h.client.Transport == nil {
		h.client.Transport = &http.Transport{
			Proxy:               nil, // agents are reached directly, never through a proxy
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     3 * cfg.Interval.D(),
		}
	}
	if cfg.KubernetesDiscovery() {
		keys := opts.SigningKeys
		if cfg.Kubernetes.AgentAuth != config.AgentAuthToken {
			keys = nil
		} else if keys == nil {
			return nil, errors.New("kubernetes.agentAuth: token needs the API server's signing keys (hub.Options.SigningKeys)")
		}
		var secret []byte
		if cfg.Kubernetes.PullKeySecretFile != "" {
			if secret, err = cfg.Kubernetes.PullKeySecret(); err != nil {
				return nil, fmt.Errorf("kubernetes.pullKeySecretFile: %w", err)
			}
		}
		h.auth = newAgentAuth(keys, cfg.Kubernetes.Namespace, cfg.Kubernetes.AgentServiceAccount, secret)
	}
	h.diagnosed = opts.Diagnosed
	h.diag.Suspects = []matrix.Suspect{}
	h.fabric = h.m.Fabric()
	h.agents = slices.Clone(cfg.Agents)
	h.met = newHubMetrics(h.reg, h)
	if opts.KubeWrites != nil {
		h.reg.MustRegister(newKubeWritesCollector(opts.KubeWrites))
	}
	if h.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	h.guard = httpguard.New(h.ln, serverLimits(), h.reg, "the matrix's")
	h.ln = h.guard
	h.srv = h.newServer()
	if t := cfg.TLS; t != nil {
		certs, err := tlsfiles.NewServer(t.CertFile, t.KeyFile, func(err error) {
			logger.Error("the renewed certificate does not load; the last good one serves on", "err", err)
		})
		if err != nil {
			h.ln.Close()
			return nil, fmt.Errorf("tls: %w", err)
		}
		h.srv.TLSConfig, h.tls = certs.Config(), true
	}
	return h, nil
}

// Addr is the address the endpoints listen on.
func (h *Hub) Addr() net.Addr { return h.ln.Addr() }

// Registry is the hub's metrics registry.
func (h *Hub) Registry() *prometheus.Registry { return h.reg }

// Run pulls and computes every interval and serves until ctx is cancelled.
func (h *Hub) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return h.guard.Run(gctx) })
	g.Go(func() error {
		serve := h.srv.Serve
		if h.tls {
			// ServeTLS offers HTTP/2 by ALPN, as Serve offers HTTP/1.1.
			serve = func(ln net.Listener) error { return h.srv.ServeTLS(ln, "", "") }
		}
		if err := serve(h.ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return h.srv.Shutdown(sctx)
	})
	g.Go(func() error {
		h.rotate(gctx, h.cfg.Plan.Rotation.D())
		return nil
	})
	g.Go(func() error {
		t := time.NewTicker(h.cfg.Interval.D())
		defer t.Stop()
		for {
			h.Round(gctx)
			select {
			case <-gctx.Done():
				return nil
			case <-t.C:
			}
		}
	})
	h.log.Info("matrix started", "listen", h.ln.Addr().String(), "tls", h.tls, "agents", len(h.agentURLs()),
		"group_by", h.cfg.GroupBy, "interval", h.cfg.Interval.D().String())
	return g.Wait()
}

// Round pulls every agent once, then recomputes the matrix and the
// diagnosis.
func (h *Hub) Round(ctx context.Context) {
	start := time.Now()
	agents := h.agentURLs()
	h.mu.Lock()
	names := h.names
	h.mu.Unlock()
	results := make([]*pull, len(agents))
	obs := make([]*api.Observations, len(agents))
	sem := make(chan struct{}, h.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, u := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				results[i] = &pull{URL: u, Error: "cancelled", Reason: "cancelled", At: h.now()}
				return
			}
			defer func() { <-sem }()
			obs[i], results[i] = h.fetch(ctx, u, names[u])
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	now := h.now()
	planned := h.Plan()
	h.mu.Lock()
	for i, p := range results {
		if p.OK {
			if err := h.claim(p.URL, obs[i].Agent.Name); err != nil {
				p.OK, p.Error, p.Reason = false, err.Error(), "identity"
			}
		}
		if p.OK {
			if n := vouch(planned, obs[i]); n > 0 {
				h.met.unplanned.Add(float64(n))
			}
			if err := h.m.Observe(now, *obs[i]); err != nil {
				p.OK, p.Error, p.Reason = false, err.Error(), "invalid"
			} else {
				h.own(p.URL, obs[i].Agent.Name)
			}
		}
		if !p.OK {
			h.met.pullErrors.WithLabelValues(p.Reason).Inc()
			if prev := h.pulls[p.URL]; prev == nil || prev.OK {
				h.log.Warn("agent pull failed: no data, not loss", "agent_url", p.URL, "err", p.Error)
			}
		}
		h.pulls[p.URL] = p
	}
	racks := h.m.Racks()
	h.snap = h.m.Snapshot(now)
	prev := h.diag
	h.diag = h.m.Localize(now)
	h.fabric, h.focus = h.m.Fabric(), focusOf(h.snap, h.diag)
	h.hist.record(now, h.diag)
	h.rounds.Add(1)
	h.gen.Add(1)
	h.mu.Unlock()
	h.setRacks(racks)
	h.logChanges(prev, h.diag)
	if h.diagnosed != nil {
		h.diagnosed(h.Diagnosis())
	}
	h.met.rounds.Inc()
	h.met.roundSeconds.Observe(time.Since(start).Seconds())
}

// claim refuses a report from url in the name of an agent that is not
// there: discovery found another agent at url, or another listed address
// reports under that name. h.mu is held.
func (h *Hub) claim(url, name string) error {
	if want := h.names[url]; want != "" && name != want {
		return fmt.Errorf("reports as agent %.64q; discovery found %q at this address", name, want)
	}
	if o := h.owner[name]; o != "" && o != url {
		return fmt.Errorf("reports as agent %.64q, whose reports come from %s", name, o)
	}
	return nil
}

// own records that url's reports are agent name's. An address that now
// reports another name has its former agent forgotten: names do not
// pile up behind one address. h.mu is held.
func (h *Hub) own(url, name string) {
	if prev := h.owned[url]; prev != name {
		if prev != "" {
			h.m.Forget(prev)
			delete(h.owner, prev)
		}
		h.owned[url], h.owner[name] = name, url
	}
}

// disown forgets url's agent: url left. h.mu is held.
func (h *Hub) disown(url string) {
	if name := h.owned[url]; name != "" {
		h.m.Forget(name)
		delete(h.owner, name)
		delete(h.owned, url)
	}
}

// logChanges logs suspects that appear or go: once each, not every round.
func (h *Hub) logChanges(prev, cur matrix.Diagnosis) {
	key := func(s matrix.Suspect) string { return s.Kind + "/" + s.Name }
	was := map[string]bool{}
	for _, s := range prev.Suspects {
		was[key(s)] = true
	}
	for _, s := range cur.Suspects {
		if !was[key(s)] {
			h.log.Warn("suspect", "kind", s.Kind, "name", s.Name, "score", s.Score, "estimated_loss", s.EstimatedLoss, "detail", s.Evidence.Detail)
		}
		delete(was, key(s))
	}
	for k := range was {
		kind, name, _ := strings.Cut(k, "/")
		h.log.Info("suspect cleared", "kind", kind, "name", name)
	}
	disputed := map[string]bool{}
	for _, d := range prev.Disputed {
		disputed[d.Kind+"/"+d.Name+"/"+d.Family] = true
	}
	for _, d := range cur.Disputed {
		if !disputed[d.Kind+"/"+d.Name+"/"+d.Family] {
			h.log.Warn("disputed: a minority of the agents crossing it blame it", "kind", d.Kind, "name", d.Name, "family", d.Family,
				"confirming", d.Confirming, "contradicting", d.Contradicting, "confirmers", d.Confirmers)
		}
	}
}

// fetch pulls the agent at base; name is the agent discovery found
// there, whose pull key the request carries ("" without discovery).
func (h *Hub) fetch(ctx context.Context, base, name string) (*api.Observations, *pull) {
	p := &pull{URL: base}
	fail := func(reason string, err error) (*api.Observations, *pull) {
		p.Reason, p.Error, p.At = reason, err.Error(), h.now()
		return nil, p
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+api.ObservationsPath, nil)
	if err != nil {
		return fail("request", err)
	}
	req.Header.Set("User-Agent", buildinfo.UserAgent("matrix"))
	if h.auth != nil && name != "" {
		req.Header.Set("Authorization", api.SignPull(h.auth.pullKey(name), req.Method, req.URL.RequestURI(), h.now()))
	}
	resp, err := h.client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fail("timeout", err)
		}
		return fail("connect", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fail("http", fmt.Errorf("%s", resp.Status))
	}
	var obs api.Observations
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxBody))
	if err := dec.Decode(&obs); err != nil {
		return fail("decode", err)
	}
	p.OK, p.Agent, p.At = true, obs.Agent.Name, h.now()
	return &obs, p
}

// SetAgents replaces the agents pulled from the next round on (discovery
// calls it with each snapshot). An agent that leaves is forgotten at once:
// it is gone, not missing, and its last report must not linger.
func (h *Hub) SetAgents(urls []string) {
	urls = slices.Clone(urls)
	slices.Sort(urls)
	urls = slices.Compact(urls)
	h.mu.Lock()
	defer h.mu.Unlock()
	for u := range h.pulls {
		// Sorted: a linear search here was quadratic, 0.7 s under the
		// lock at 20,000 agents (BenchmarkSetPeers10000).
		if _, ok := slices.BinarySearch(urls, u); !ok {
			h.disown(u)
			delete(h.pulls, u)
		}
	}
	h.agents = urls
	h.gen.Add(1)
}

func (h *Hub) agentURLs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.agents
}

// Snapshot returns the latest matrix.
func (h *Hub) Snapshot() matrix.Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snap
}

// Diagnosis returns the latest diagnosis.
func (h *Hub) Diagnosis() matrix.Diagnosis {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.diag
}
