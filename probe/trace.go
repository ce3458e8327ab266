package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Tracer is a Paris-style TCP SYN traceroute (Augustin et al., IMC 2006):
// every probe of a flow carries the flow's own 5-tuple, so kernel and
// switch ECMP send each TTL of the flow down the same path the flow's
// regular probes take, and a loss seen by TCPSYN can be traced to the
// device. It shares the TCPSYN engine's raw socket and reserved source
// ports: while a flow is traced, its slot is in trace mode (the engine's
// reader hands the destination's SYN-ACK or RST to the tracer) and the
// flow's regular probes wait. Time Exceeded and Unreachable come on the
// tracer's own raw ICMP socket.
//
// On IPv6 every probe of a flow also carries the flow's FlowLabel, which
// ECMP may hash, and ICMPv6 errors are matched on it where IPv4's are
// matched on the IP ID.
type Tracer struct {
	syn  *TCPSYN
	own  bool // standalone: the tracer made syn and closes it
	sock rawSocket
	log  *slog.Logger

	mu    sync.Mutex
	flows map[uint16]*flowRun // flows being traced, by source port
	// Unmatched counts ICMP errors that answered no probe in flight; TCP
	// answers that match nothing are counted by the TCPSYN engine.
	Unmatched
	closeOnce sync.Once
}

// TraceConfig bounds one Trace call.
type TraceConfig struct {
	// MaxTTL is the last TTL tried when the destination does not answer.
	MaxTTL int
	// Probes is the number of probes sent to each hop of each flow.
	Probes int
	// Timeout is how long an answer may take to count.
	Timeout time.Duration
	// Rate bounds the probes per second of the whole Trace call.
	Rate float64
	// Concurrency is how many flows are traced at once.
	Concurrency int
	// Retries is how many extra rounds re-probe, a RetryGap apart, the
	// intermediate TTLs of a flow that have not answered at all: routers
	// answer a burst and then about one probe a second (see ReadLoss), so
	// mapping many flows through one router takes patience, not more
	// probes.
	Retries  int
	RetryGap time.Duration
	// Size pads each probe to Size bytes of IP packet (0: a bare SYN),
	// Don't Fragment as on every SYN: a trace of large probes ends at the
	// last hop a packet of that size reaches, where a path MTU black
	// hole swallows the rest. A size above the first hop's MTU fails to
	// send.
	Size int
}

// Trace defaults: data-center paths are a handful of hops.
const (
	DefaultTraceMaxTTL      = 16
	DefaultTraceProbes      = 3
	DefaultTraceTimeout     = time.Second
	DefaultTraceRate        = 500
	DefaultTraceConcurrency = 16
	// DefaultTraceRetryGap is Linux's default net.ipv4.icmp_ratelimit.
	DefaultTraceRetryGap = time.Second
	// DefaultTraceRetries is the retry rounds of a trace a person waits
	// for (prober trace, a trace from the matrix's page): rate-limited
	// routers fill in a second at a time. Periodic traces take none.
	DefaultTraceRetries = 8
	// MaxTraceTTL and MaxTraceProbes bound MaxTTL and Probes (Check);
	// config and the trace command take them from here.
	MaxTraceTTL    = 64
	MaxTraceProbes = 100
)

// SetDefaults fills zero fields.
func (c *TraceConfig) SetDefaults() {
	if c.MaxTTL == 0 {
		c.MaxTTL = DefaultTraceMaxTTL
	}
	if c.Probes == 0 {
		c.Probes = DefaultTraceProbes
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTraceTimeout
	}
	if c.Rate == 0 {
		c.Rate = DefaultTraceRate
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultTraceConcurrency
	}
	if c.RetryGap == 0 {
		c.RetryGap = DefaultTraceRetryGap
	}
}

// Check reports every field of a defaulted TraceConfig that is out of
// range to bad, by field name: maxTTL, probes, timeout, rate, retries,
// concurrency, retryGap, size. It is the one definition of the ranges: Trace runs it, and
// so do config's validation and the trace command, which map the names
// to their own fields and flags.
func (c TraceConfig) Check(bad func(field, format string, args ...any)) {
	if c.MaxTTL < 1 || c.MaxTTL > MaxTraceTTL {
		bad("maxTTL", "%d not in 1..%d", c.MaxTTL, MaxTraceTTL)
	}
	if c.Probes < 1 || c.Probes > MaxTraceProbes {
		bad("probes", "%d not in 1..%d", c.Probes, MaxTraceProbes)
	}
	if c.Timeout <= 0 {
		bad("timeout", "%s must be positive", c.Timeout)
	}
	if !(c.Rate > 0) {
		bad("rate", "%g must be positive", c.Rate)
	}
	if c.Retries < 0 || c.Probes+c.Retries > 255 {
		bad("retries", "%d not in 0..%d", c.Retries, 255-c.Probes)
	}
	if c.Concurrency < 1 {
		bad("concurrency", "%d must be at least 1", c.Concurrency)
	}
	if c.RetryGap <= 0 {
		bad("retryGap", "%s must be positive", c.RetryGap)
	}
	if c.Size < 0 || c.Size > MaxProbeSize {
		bad("size", "%d not in 0..%d", c.Size, MaxProbeSize)
	}
}

// Validate is Check with the problems joined.
func (c TraceConfig) Validate() error { return joinChecks(c.Check) }

// Hop is one TTL of a traced flow.
type Hop struct {
	TTL int
	// Addr answered at this TTL; the zero Addr when every probe went
	// unanswered. If several addresses answered (the path changed during
	// the trace), the one that answered most.
	Addr           netip.Addr
	Sent, Received int
	RTT            time.Duration // median of the answered probes
	// Destination: the target itself answered (SYN-ACK, RST or
	// Unreachable from its address). Probes sent past the destination's
	// TTL before it was known count here too.
	Destination bool
	// Unreachable: this hop answered with ICMP Destination Unreachable.
	Unreachable bool
	// Inferred: no probe of this flow was answered here, and Addr is
	// what the flows traced with it say the hop must be (see inferHops).
	// Received stays 0.
	Inferred bool
}

// FlowTrace is the traced path of one flow.
type FlowTrace struct {
	SourcePort uint16
	// Hops in TTL order, up to the destination when Reached, else up to
	// the last hop that answered.
	Hops    []Hop
	Reached bool
	// Sent and Received count the probes that went past the last
	// intermediate hop: end to end. When Reached they equal the last
	// hop's counts.
	Sent, Received int
	Start          time.Time
	Duration       time.Duration
}

// traceSink is a flow in trace mode, as the TCPSYN reader sees it.
type traceSink interface {
	tcpAnswer(r tcpReply, at time.Time)
}

// NewTracer opens the ICMP socket for a tracer that shares syn's raw
// socket and source ports. Run must be called to read ICMP, and syn's Run
// to read the destination's answers.
func NewTracer(syn *TCPSYN, logger *slog.Logger) (*Tracer, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	sock, err := openICMPRaw(syn.src)
	if err != nil {
		return nil, err
	}
	return &Tracer{syn: syn, sock: sock, log: logger, flows: map[uint16]*flowRun{}}, nil
}

// StandaloneConfig configures NewStandaloneTracer.
type StandaloneConfig struct {
	Source   netip.Addr
	PortBase uint16 // source ports are reserved from here up, skipping ports in use
	Flows    int
	Logger   *slog.Logger
}

// NewStandaloneTracer makes a tracer with a TCPSYN engine of its own, for
// `prober trace`: it reserves cfg.Flows source ports and Run reads both
// sockets. Ports returns the reserved source ports.
func NewStandaloneTracer(cfg StandaloneConfig) (*Tracer, error) {
	syn, err := NewTCPSYN(TCPSYNConfig{Source: cfg.Source, PortBase: cfg.PortBase, Ports: cfg.Flows, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	tr, err := NewTracer(syn, cfg.Logger)
	if err != nil {
		syn.Close()
		return nil, err
	}
	tr.own = true
	return tr, nil
}

// Ports takes n of the engine's free source ports; see TCPSYN.AllocPorts.
func (tr *Tracer) Ports(n int) ([]uint16, error) { return tr.syn.AllocPorts(n) }

// UnmatchedTotal returns the ICMP and TCP counters of answers that matched no
// probe: for a standalone tracer, everything it dropped.
func (tr *Tracer) UnmatchedTotal() map[string]uint64 {
	out := tr.Unmatched.UnmatchedCounts()
	if tr.own {
		for k, v := range tr.syn.UnmatchedCounts() {
			out[k] += v
		}
	}
	return out
}

// Run reads ICMP errors until ctx is cancelled or the tracer is closed. A
// standalone tracer also runs its TCPSYN reader.
func (tr *Tracer) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, tr.Close)
	defer stop()
	synDone := make(chan error, 1)
	if tr.own {
		go func() { synDone <- tr.syn.Run(ctx) }()
	} else {
		synDone <- nil
	}
	buf := make([]byte, 1500)
	for {
		n, at, err := tr.sock.recv(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, errClosed) {
				if tr.own {
					tr.syn.Close()
				}
				return <-synDone
			}
			tr.RecvErrors.Add(1)
			tr.log.Warn("trace receive", "err", err)
			time.Sleep(10 * time.Millisecond) // a persistent error must not spin
			continue
		}
		tr.deliver(buf[:n], at)
	}
}

// Close closes the ICMP socket, and a standalone tracer's engine.
func (tr *Tracer) Close() {
	tr.closeOnce.Do(func() {
		tr.sock.close()
		if tr.own {
			tr.syn.Close()
		}
	})
}

// deliver matches one ICMP error against the probes in flight.
func (tr *Tracer) deliver(pkt []byte, at time.Time) {
	q, ok := decodeQuote(pkt)
	if !ok || q.src != tr.syn.src {
		tr.Foreign.Add(1) // somebody else's traceroute or an ICMP error not about TCP
		return
	}
	tr.mu.Lock()
	fr := tr.flows[q.sport]
	tr.mu.Unlock()
	if fr == nil {
		tr.Late.Add(1)
		return
	}
	fr.icmpAnswer(q, at)
}

// Trace traces the flows from sports to target concurrently and returns
// one FlowTrace per source port, in the order given. The ports must be
// reserved by the engine (AllocPorts, or Ports for a standalone tracer);
// a flow whose regular probe is in flight is traced as soon as it ends.
func (tr *Tracer) Trace(ctx context.Context, target Target, sports []uint16, cfg TraceConfig) ([]FlowTrace, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if !sameFamily(tr.syn.src, target.Addr) {
		return nil, errOtherFamily("trace", tr.syn.src, target.Addr)
	}
	for _, p := range sports {
		if !tr.syn.reserved(p) {
			return nil, fmt.Errorf("trace: source port %d is not reserved", p)
		}
	}
	out := make([]FlowTrace, len(sports))
	errs := make([]error, len(sports))
	g := &traceGroup{runs: make([]*flowRun, len(sports))}
	pace := newPacer(cfg.Rate)
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	hint := 0
	for i, sport := range sports {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return nil, ctx.Err()
		}
		run := traceRun{pace: pace, g: g, idx: i, hint: hint}
		if i == 0 && len(sports) > 1 {
			run.scouted = make(chan int, 1)
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i], errs[i] = tr.traceFlow(ctx, target, sport, cfg, run)
		}()
		if run.scouted != nil {
			select {
			case hint = <-run.scouted:
			case <-ctx.Done():
				wg.Wait()
				return nil, ctx.Err()
			}
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fillInferred(out)
	return out, errors.Join(errs...)
}

// traceRun is what one flow of a Trace call shares with the others.
type traceRun struct {
	pace *pacer
	g    *traceGroup
	idx  int // in g
	// hint is the TTL where the first flow's path ended, 0 if unknown.
	hint int
	// scouted, for the first flow of several, takes its end TTL once its
	// first round is over: the others start then, knowing the hint.
	scouted chan int
}

// traceFlow sends cfg.Probes rounds of TTL-limited SYNs for one flow, at
// the paced rate. A round sends the TTLs up to the flow's end (its
// destination, or a hop that answered Unreachable), in random order when
// several flows are traced together, and then, while the end is unknown,
// the next TTLs one by one up to MaxTTL.
// The first flow of a Trace goes alone and in TTL order, so that the
// others know where paths end (run.hint) and can shuffle: flows that send
// their TTLs in the same order would spend every router's burst of ICMP
// answers on the same few flows. A round ends when every probe is
// answered or a few RTTs after its last send (traceroute's "near"
// heuristic), bounded by Timeout. Then up to cfg.Retries rounds, RetryGap
// apart, re-probe the hops still in doubt (traceGroup.reprobe) as the
// routers' ICMP rate limits allow more answers; the flow ends as soon as
// none is.
func (tr *Tracer) traceFlow(ctx context.Context, target Target, sport uint16, cfg TraceConfig, run traceRun) (FlowTrace, error) {
	fr := &flowRun{
		tr: tr, sport: sport, dst: target.Addr, dport: target.Port, nonce: uint16(rand.Uint32()),
		timeout: cfg.Timeout, size: cfg.Size, wake: make(chan struct{}, 1),
		probes: make([][]probeRec, cfg.MaxTTL),
	}
	fr.flowLabel = FlowLabel(netip.AddrPortFrom(tr.syn.src, sport), netip.AddrPortFrom(target.Addr, target.Port))
	for i := range fr.probes {
		fr.probes[i] = make([]probeRec, cfg.Probes+cfg.Retries)
	}
	scout := func() {
		if run.scouted != nil {
			run.scouted <- fr.end()
			run.scouted = nil
		}
	}
	defer scout()
	release, err := tr.syn.beginTrace(ctx, sport, fr)
	if err != nil {
		return FlowTrace{SourcePort: sport}, err
	}
	defer release()
	tr.mu.Lock()
	tr.flows[sport] = fr
	tr.mu.Unlock()
	run.g.mu.Lock()
	run.g.runs[run.idx] = fr
	run.g.mu.Unlock()
	defer func() {
		tr.mu.Lock()
		delete(tr.flows, sport)
		tr.mu.Unlock()
	}()

	start := time.Now()
	enc := tr.syn.encoders.Get().(*synEncoder)
	defer tr.syn.encoders.Put(enc)
	failed := func(err error) (FlowTrace, error) {
		if ctx.Err() == nil {
			err = fmt.Errorf("trace send to %s from port %d: %w", target.Addr, sport, err)
		}
		return FlowTrace{SourcePort: sport}, err
	}
	var sent time.Time // the first probe
	for round := range cfg.Probes {
		known := fr.end()
		if known == 0 && run.scouted == nil {
			known = min(run.hint, cfg.MaxTTL)
		}
		ttls := make([]int, known)
		for i := range ttls {
			ttls[i] = i + 1
		}
		// Random order spreads routers' bursts over the flows of a
		// trace. A lone flow (the agent's) goes in TTL order: each
		// round then ends on the probe that reaches the destination,
		// whose answer and our RST close the 5-tuple in the stateful
		// devices on the way (an LB's, NAT's or firewall's conntrack),
		// instead of leaving it half-open for minutes from a probe
		// that died past them, under the flow's next regular SYN.
		if len(run.g.runs) > 1 {
			rand.Shuffle(len(ttls), func(i, j int) { ttls[i], ttls[j] = ttls[j], ttls[i] })
		}
		last, err := tr.sendTTLs(ctx, enc, fr, run.pace, ttls, round)
		if err != nil {
			return failed(err)
		}
		for ttl := known + 1; ttl <= cfg.MaxTTL; ttl++ {
			if end := fr.end(); end > 0 && ttl > end {
				break
			}
			l, err := tr.sendTTLs(ctx, enc, fr, run.pace, []int{ttl}, round)
			if err != nil {
				return failed(err)
			}
			if !l.IsZero() {
				last = l
			}
		}
		if sent.IsZero() {
			sent = fr.firstSent()
		}
		if err := fr.waitRound(ctx, last, cfg.Timeout); err != nil {
			return FlowTrace{SourcePort: sport}, err
		}
		scout()
	}
	// Retries keep a fixed beat from the first send: a router's ICMP
	// budget refills at one answer per RetryGap from when the first
	// round drained it, and time spent sending and waiting must not
	// stretch the beat. A beat that comes a little early costs nothing:
	// the answer it misses is there for the next one.
	next := sent.Add(cfg.RetryGap)
	for round := cfg.Probes; round < cfg.Probes+cfg.Retries; round++ {
		first := round == cfg.Probes
		if len(run.g.reprobe(run.idx, fr, first)) == 0 {
			break
		}
		if err := sleep(ctx, time.Until(next)); err != nil {
			return FlowTrace{SourcePort: sport}, err
		}
		next = next.Add(cfg.RetryGap)
		// Deepest first, each hop once the deeper ones' answers are in:
		// an answer from the far side of a doubt can settle it
		// (inferHops), and then the probe that would have spent a
		// router's one answer this beat on this flow is not sent, and
		// that answer goes to a flow that needs it.
		ttls := run.g.reprobe(run.idx, fr, first)
		for len(ttls) > 0 {
			ttl := ttls[len(ttls)-1]
			last, err := tr.sendTTLs(ctx, enc, fr, run.pace, []int{ttl}, round)
			if err != nil {
				return failed(err)
			}
			if err := fr.waitRound(ctx, last, cfg.Timeout); err != nil {
				return FlowTrace{SourcePort: sport}, err
			}
			ttls = slices.DeleteFunc(run.g.reprobe(run.idx, fr, first), func(t int) bool { return t >= ttl })
		}
	}
	ft := fr.result()
	ft.Start, ft.Duration = start, time.Since(start)
	return ft, nil
}

// sendTTLs sends probe number round at each of ttls, at the paced rate,
// skipping those past the flow's end, and returns when the last left.
func (tr *Tracer) sendTTLs(ctx context.Context, enc *synEncoder, fr *flowRun, pace *pacer, ttls []int, round int) (last time.Time, err error) {
	for _, ttl := range ttls {
		if end := fr.end(); end > 0 && ttl > end {
			continue
		}
		if err := pace.wait(ctx); err != nil {
			return last, err
		}
		if err := tr.send(enc, fr, ttl, round); err != nil {
			return last, err
		}
		last = time.Now()
	}
	return last, nil
}

// send sends probe number round at ttl. When the flow's destination is
// known and its previous probe there went unanswered, a RST with that
// probe's sequence number goes first: a lost SYN-ACK leaves a half-open
// entry on the target that would answer this SYN with a rate-limited
// out-of-window ACK instead of a SYN-ACK (see TCPSYN).
func (tr *Tracer) send(enc *synEncoder, fr *flowRun, ttl, round int) error {
	seq := traceSeq(fr.nonce, uint8(ttl), uint8(round))
	p := synPacket{src: tr.syn.src, dst: fr.dst, sport: fr.sport, dport: fr.dport, ttl: uint8(ttl)}
	fr.mu.Lock()
	stale, hasStale := fr.staleBefore(ttl, round)
	fr.probes[ttl-1][round] = probeRec{sent: time.Now(), pending: true}
	fr.outstanding++
	fr.mu.Unlock()
	if hasStale {
		p.seq, p.ipID, p.rst = stale+1, 0, true
		if err := tr.syn.send(enc, p); err != nil {
			return err
		}
	}
	p.seq, p.ipID, p.rst, p.size = seq, traceIPID(uint8(ttl), uint8(round)), false, fr.size
	if err := tr.syn.send(enc, p); err != nil {
		if fr.size > 0 && errors.Is(err, syscall.EMSGSIZE) {
			return fmt.Errorf("%d-byte probes do not fit the route to %s: %w", fr.size, fr.dst, err)
		}
		return err
	}
	return nil
}

// pacer spaces sends evenly at a rate shared by every flow of a Trace.
type pacer struct {
	mu   sync.Mutex
	next time.Time
	gap  time.Duration
}

func newPacer(rate float64) *pacer {
	return &pacer{gap: time.Duration(float64(time.Second) / rate)}
}

func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	now := time.Now()
	at := now
	if p.next.After(now) {
		at = p.next
	}
	p.next = at.Add(p.gap)
	p.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		return sleep(ctx, d)
	}
	return ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// beginTrace puts the slot of sport in trace mode, for sink: it waits
// for another trace of the flow and for the flow's probe in flight to
// end, then routes the slot's answers to sink until release is called.
func (t *TCPSYN) beginTrace(ctx context.Context, sport uint16, sink traceSink) (release func(), err error) {
	if !t.reserved(sport) {
		return nil, fmt.Errorf("tcp_syn: source port %d is not reserved", sport)
	}
	s := &t.slots[int(sport)-int(t.base)]
	s.mu.Lock()
	for s.trace != nil {
		end := s.traceEnd
		s.mu.Unlock()
		select {
		case <-end:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
	end := make(chan struct{})
	s.trace, s.traceEnd = sink, end
	var idle chan struct{}
	if s.active {
		idle = make(chan struct{})
		s.idle = idle
	}
	s.mu.Unlock()
	release = func() {
		s.mu.Lock()
		if s.traceEnd == end {
			s.trace, s.traceEnd = nil, nil
			close(end)
		}
		s.mu.Unlock()
	}
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			release()
			return nil, ctx.Err()
		}
	}
	return release, nil
}

// reserved reports whether sport is one of the engine's source ports.
func (t *TCPSYN) reserved(sport uint16) bool {
	i := int(sport) - int(t.base)
	return i >= 0 && i < len(t.slots) && t.slots[i].reserved
}
