package agent

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/probe"
)

// Why a flow is traced: the reason label of prober_traceroutes_total.
const (
	traceNew      = "new"      // never traced
	tracePeriodic = "periodic" // its path is older than probing.trace.interval
	traceLoss     = "loss"     // it lost a probe since its last trace (007)
	traceRequest  = "request"  // the matrix asked, for an operator (ondemand.go)
)

// lossRetrace is the least time between two loss-triggered traces of one
// flow: a flow that keeps losing is re-traced, but not at probe rate.
const lossRetrace = 30 * time.Second

// paths keeps the traced path of every (target, tcp_syn flow): each flow
// is traced when it appears, again every probing.trace.interval, and at
// once when it loses a probe, as 007 traces a flow on retransmission. All
// traces draw from one token bucket of probing.trace.budgetPerMinute, loss
// first, so the switches' ICMP engines see a bounded load from each agent.
// A trace uses the flow's own source port on the tcp_syn engine, so it
// follows the flow's ECMP path.
type paths struct {
	a       *Agent
	trs     map[string]*probe.Tracer // by family
	cfg     Tracing
	tc      probe.TraceConfig // each trace's, cfg.Trace
	traces  *prometheus.CounterVec
	changes prometheus.Counter

	// request lets one trace on demand run at a time (ondemand.go).
	request sync.Mutex

	mu     sync.Mutex
	flows  map[flowKey]*flowPath
	lossy  map[flowKey]bool // lost a probe since the last trace
	tokens float64
	filled time.Time
	jobs   []traceJob // tick's, reused
	// life is run's context, nil before it starts: a trace on demand
	// ends with it, since the tracers' readers do.
	life context.Context
	// requestEnd is when the trace on demand running ends at the
	// latest, for the Retry-After of the next.
	requestEnd time.Time
}

type flowKey struct {
	target targetKey
	sport  uint16
}

type flowPath struct {
	addr     netip.Addr // the target's address when traced
	hops     []string
	hash     string
	suspect  int
	tracedAt time.Time
}

// newPaths opens the tracers' ICMP sockets, one per family; nil when
// tracing is off or tcp_syn is not probed.
func newPaths(a *Agent) (*paths, error) {
	cfg := a.cfg.Tracing
	if !cfg.On || !slices.Contains(a.cfg.Protocols, probe.ProtocolTCPSYN) {
		return nil, nil
	}
	trs := map[string]*probe.Tracer{}
	for fam, e := range a.fams {
		tr, err := probe.NewTracer(e.syn, a.log)
		if err != nil {
			for _, tr := range trs {
				tr.Close()
			}
			return nil, err
		}
		trs[fam] = tr
	}
	f := promauto.With(a.reg)
	return &paths{
		a: a, trs: trs, cfg: cfg, tc: cfg.Trace,
		traces: f.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_traceroutes_total",
			Help: "Flow traceroutes started, by reason: new, periodic, loss, request.",
		}, []string{"reason"}),
		changes: f.NewCounter(prometheus.CounterOpts{
			Name: "prober_path_changes_total",
			Help: "Traced flows whose path differed from their previous trace.",
		}),
		flows:  map[flowKey]*flowPath{},
		lossy:  map[flowKey]bool{},
		tokens: float64(cfg.BudgetPerMinute),
		filled: a.now(),
	}, nil
}

func (p *paths) close() {
	if p != nil {
		for _, tr := range p.trs {
			tr.Close()
		}
	}
}

// run reads the tracer's ICMP socket and traces flows as they fall due,
// until ctx is cancelled.
func (p *paths) run(ctx context.Context) error {
	done := make(chan error, len(p.trs))
	for _, tr := range p.trs {
		go func() { done <- tr.Run(ctx) }()
	}
	for _, r := range []string{traceNew, tracePeriodic, traceLoss, traceRequest} {
		p.traces.WithLabelValues(r)
	}
	p.mu.Lock()
	p.life = ctx
	p.mu.Unlock()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			var errs []error
			for range p.trs {
				errs = append(errs, <-done)
			}
			return errors.Join(errs...)
		case <-t.C:
			p.tick(ctx)
		}
	}
}

// lost notes that a flow lost a probe: it is traced at the next tick.
func (p *paths) lost(t *target, proto probe.Protocol, flow int, r probe.Result) {
	if p == nil || proto != probe.ProtocolTCPSYN || r.Outcome != probe.Lost || flow >= len(t.ports) {
		return
	}
	p.mu.Lock()
	p.lossy[flowKey{t.key(), t.ports[flow]}] = true
	p.mu.Unlock()
}

type traceJob struct {
	key    flowKey
	target probe.Target
	reason string
	age    time.Time
}

// tick traces the flows that are due, as far as the budget allows. It
// looks at the flows only when the bucket holds a token, and keeps only
// as many jobs as it holds: a list of every due flow, sorted, every
// second was 200 KB of garbage a second at a 5,000-node plan (1,312
// flows, 30 traces a minute), over half of what the agent allocated
// (issue 14).
func (p *paths) tick(ctx context.Context) {
	now := p.a.now()
	p.a.mu.Lock()
	p.mu.Lock()
	p.refill(now)
	jobs, reserve := p.due(now)
	p.mu.Unlock()
	p.a.mu.Unlock()

	for _, j := range jobs {
		need := 1.0
		if j.reason == tracePeriodic {
			need += float64(reserve)
		}
		p.mu.Lock()
		ok := p.tokens >= need
		if ok {
			p.tokens--
		}
		p.mu.Unlock()
		if !ok || ctx.Err() != nil {
			return
		}
		p.trace(ctx, j)
	}
}

// due lists the flows to trace now, in trace order, as many as the
// bucket holds tokens for: periodic re-traces only from the tokens above
// reserve, which it returns. A trace on demand has someone waiting for
// it (kubectl prober trace, the matrix's page) and needs a token for
// each flow of its target at once; a periodic re-trace can wait for the
// next token. On the real cluster the agents' re-traces kept the bucket
// below a target's flows, and an operator's trace waited 32 s. p.a.mu
// and p.mu are held.
func (p *paths) due(now time.Time) (jobs []traceJob, reserve int) {
	jobs = p.jobs[:0]
	n := int(p.tokens)
	if n <= 0 {
		p.jobs = jobs
		return jobs, 0
	}
	widest := 0
	for _, t := range p.a.targets {
		widest = max(widest, len(t.ports))
		for _, sport := range t.ports {
			k := flowKey{t.key(), sport}
			fp := p.flows[k]
			job := traceJob{key: k, target: probe.Target{Addr: t.Addr, Port: t.Port}}
			switch {
			case fp == nil || fp.addr != t.Addr:
				job.reason = traceNew
			case p.lossy[k] && now.Sub(fp.tracedAt) >= lossRetrace:
				job.reason = traceLoss
			case now.Sub(fp.tracedAt) >= p.cfg.Interval:
				job.reason, job.age = tracePeriodic, fp.tracedAt
			default:
				continue
			}
			jobs = keepFirst(jobs, job, n)
		}
	}
	reserve = min(widest, p.cfg.BudgetPerMinute/2)
	others := 0
	for _, j := range jobs {
		if j.reason != tracePeriodic {
			others++
		}
	}
	// Periodic jobs come last: keep those the tokens above the reserve
	// pay for, after the others.
	jobs = jobs[:others+max(0, min(len(jobs)-others, n-reserve-others))]
	p.jobs = jobs
	return jobs, reserve
}

// refill adds the tokens earned since the last refill: budgetPerMinute
// per minute, at most one minute's. p.mu is held.
func (p *paths) refill(now time.Time) {
	budget := float64(p.cfg.BudgetPerMinute)
	p.tokens = min(budget, p.tokens+now.Sub(p.filled).Minutes()*budget)
	p.filled = now
}

// keepFirst inserts j into jobs, which is in trace order, and keeps the
// first n.
func keepFirst(jobs []traceJob, j traceJob, n int) []traceJob {
	i := len(jobs)
	for i > 0 && j.before(jobs[i-1]) {
		i--
	}
	if i >= n {
		return jobs
	}
	if len(jobs) < n {
		jobs = append(jobs, traceJob{})
	}
	copy(jobs[i+1:], jobs[i:len(jobs)-1])
	jobs[i] = j
	return jobs
}

// before orders traces: flows that lost a probe first, then new ones,
// then periodic ones, the longest untraced first.
func (j traceJob) before(k traceJob) bool {
	if rj, rk := traceRank(j.reason), traceRank(k.reason); rj != rk {
		return rj < rk
	}
	return j.age.Before(k.age)
}

func traceRank(reason string) int {
	switch reason {
	case traceLoss:
		return 0
	case traceNew:
		return 1
	}
	return 2
}

// forget drops a departed target's paths.
func (p *paths) forget(t *target) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sport := range t.ports {
		delete(p.flows, flowKey{t.key(), sport})
		delete(p.lossy, flowKey{t.key(), sport})
	}
}

// trace traces one flow and keeps its path.
func (p *paths) trace(ctx context.Context, j traceJob) {
	p.traces.WithLabelValues(j.reason).Inc()
	fts, err := p.trs[j.key.target.family].Trace(ctx, j.target, []uint16{j.key.sport}, p.tc)
	if err != nil || len(fts) != 1 {
		if ctx.Err() == nil {
			p.a.log.Debug("trace", "peer", j.key.target.name, "family", j.key.target.family, "source_port", j.key.sport, "err", err)
		}
		return
	}
	p.keep(j.key, j.target.Addr, fts[0])
}

// keep makes ft the kept path of flow k to addr, the matrix's next
// reading of it. A hop inferred from the other flows of a trace on demand
// is kept silent: the matrix takes a kept hop as heard, and the report
// of that trace marks the inference itself.
func (p *paths) keep(k flowKey, addr netip.Addr, ft probe.FlowTrace) {
	hops := ft.Path()
	for i, h := range ft.Hops {
		if h.Inferred {
			hops[i] = ""
		}
	}
	now := p.a.now()
	p.a.mu.Lock()
	defer p.a.mu.Unlock()
	if t := p.a.targets[k.target]; t == nil || t.Addr != addr {
		return // it left while traced: forget has run
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.lossy, k)
	prev := p.flows[k]
	if prev != nil && prev.addr == addr {
		if !probe.SamePath(prev.hops, hops) {
			p.changes.Inc()
			p.a.log.Info("path changed", "peer", k.target.name, "family", k.target.family, "source_port", k.sport, "from", prev.hops, "to", hops)
		}
		hops = probe.MergePath(prev.hops, hops)
	}
	p.flows[k] = &flowPath{
		addr: addr, hops: hops, hash: probe.PathHash(hops),
		suspect: ft.Loss(probe.DefaultNoise).SuspectHop, tracedAt: now,
	}
}

// flowPath returns the API view of a flow's last traced path, or nil.
func (p *paths) flowPath(target targetKey, sport uint16, now time.Time) *api.FlowPath {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fp := p.flows[flowKey{target, sport}]
	if fp == nil {
		return nil
	}
	return &api.FlowPath{
		Hops: slices.Clone(fp.hops), Hash: fp.hash, TracedAt: fp.tracedAt,
		AgeSeconds: now.Sub(fp.tracedAt).Seconds(), SuspectHop: fp.suspect,
	}
}
