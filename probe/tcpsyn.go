package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// TCPSYN sends half-open TCP handshakes: a crafted SYN, and a SYN-ACK or
// RST back means the target was reached. Each probe goes out from one of a
// fixed set of source ports, so a (target, source port) pair is a fixed
// 5-tuple for the agent's lifetime and kernel ECMP keeps it on one path
// (Paris traceroute's insight): loss is then measured per path. On IPv6
// the flow's FlowLabel, which ECMP may hash too, is part of the flow: it
// is a function of the 5-tuple, so it is fixed with it.
//
// The kernel's own RST: our SYN-ACKs arrive at a port where no socket
// listens (we only bind the port to reserve it), so the kernel answers each
// with a RST. That is what we want: it tears down the half-open connection
// on the target, so a probe leaves no state behind, exactly as a
// SYN-scanner's kernel would. If that RST is lost, the target keeps a
// SYN_RECV entry for our fixed 5-tuple; so does a lost SYN-ACK. Linux then
// answers later SYNs of the flow (new sequence numbers) only with
// out-of-window ACKs rate-limited to one per net.ipv4.tcp_invalid_ratelimit
// (500 ms), until its own SYN-ACK retransmission is reset about a second
// later: several probes would read as lost that were not (measured in the
// lab: 35% read under 20% injected). So each flow remembers which of its
// sequence numbers may have left such an entry (the last answered probe's,
// every lost probe's since, or exactly the one an out-of-window ACK
// acknowledges) and Probe sends a RST for each before the next SYN. A RST
// with the entry's own sequence number clears it; a target with no entry
// drops it in silence. Stale state then needs two losses in a row.
// An out-of-window ACK that does arrive is counted as an answer, since the
// target did answer our SYN.
type TCPSYN struct {
	src  netip.Addr
	base uint16
	// slots is indexed by source port - base; a slot is one flow.
	slots []synSlot
	sock  rawSocket
	log   *slog.Logger
	// mtus reads the kernel's path MTU cache in the engine's network
	// namespace, and tooBig hears "fragmentation needed" / "packet too
	// big" quoting our SYNs; nil where they could not be opened (a
	// signalled smaller MTU then reads as loss).
	mtus   *routeMTU
	tooBig rawSocket

	mu   sync.Mutex
	free []uint16 // reserved source ports not given to a flow

	encoders sync.Pool
	Unmatched
	closeOnce sync.Once
}

// synSlot is the in-flight state of one source port. The reader and the
// prober meet here; ch is buffered so the reader never blocks.
type synSlot struct {
	// trace, while set (under mu), owns the flow: a traceroute of this 5-tuple
	// (trace.go) gets its SYN-ACKs and RSTs, and Probe waits for
	// traceEnd, so the flow's regular probes are delayed, not lost.
	trace    traceSink
	traceEnd chan struct{}
	// idle, when set, is closed as the probe in flight ends: a trace
	// waits on it before taking the flow.
	idle chan struct{}

	mu       sync.Mutex
	reserved bool
	active   bool
	dst      netip.Addr
	dport    uint16
	seq      uint32
	pad      uint32 // the probe's padding (synPadding): a RST acknowledges it
	sentAt   time.Time
	ch       chan synAnswer
	// timer bounds the wait of the probe in flight: one per flow, reset
	// for each probe, rather than one allocated per probe (200 a second
	// at the deployed cap).
	timer *time.Timer
	// stale holds sequence numbers of this flow that may have left a
	// half-open entry on lastDst:lastDport (see TCPSYN).
	stale     [maxStale]uint32
	nStale    int
	lastDst   netip.Addr
	lastDport uint16
	// staleAnswered: stale holds just the last probe's sequence number,
	// whose SYN-ACK came back at answeredAt (see staleAnswerFor).
	staleAnswered bool
	answeredAt    time.Time
}

const maxStale = 4

// staleAnswerFor is how long the sequence number of a probe answered by
// a SYN-ACK stays stale. Only our kernel's RST to that SYN-ACK could have
// left an entry, and if it was lost the target sends the SYN-ACK again 1 s
// and 3 s later (RFC 6298's initial 1 s timeout, doubled), each met by
// another RST: after both, an entry remains only if every one of those
// packets or RSTs was lost. A flow probed less often than this (every
// 8 s under the deployed rate cap at a 5,000-node plan) then sends its SYN
// alone, not a RST before it: half the flow's packets (issue 14). Lost
// probes keep their numbers stale as long as before.
const staleAnswerFor = 4 * time.Second

// staleRSTs returns the sequence numbers a probe to dst:dport at now
// sends a RST for before its SYN.
func (s *synSlot) staleRSTs(dst netip.Addr, dport uint16, now time.Time) ([maxStale]uint32, int) {
	if s.lastDst != dst || s.lastDport != dport {
		s.nStale = 0 // a new target: nothing of ours is half-open there
	} else if s.staleAnswered && now.Sub(s.answeredAt) >= staleAnswerFor {
		s.nStale = 0
	}
	var stale [maxStale]uint32
	n := copy(stale[:], s.stale[:s.nStale])
	return stale, n
}

// settle updates the flow's possibly-stale sequence numbers after a probe
// with sequence number seq ended with a.
func (s *synSlot) settle(seq uint32, a synAnswer, lost bool) {
	s.staleAnswered = false
	switch {
	case lost: // the SYN may have arrived and its SYN-ACK been lost
		if s.nStale == maxStale {
			copy(s.stale[:], s.stale[1:])
			s.nStale--
		}
		s.stale[s.nStale] = seq
		s.nStale++
	case a.outcome == Refused: // a RST: the target holds nothing for us
		s.nStale = 0
	case a.staleAck != 0: // an out-of-window ACK names the stale entry
		s.stale[0], s.nStale = a.staleAck-1, 1
	default: // a SYN-ACK: only our kernel's RST to it may have been lost
		s.stale[0], s.nStale = seq, 1
		s.staleAnswered, s.answeredAt = true, a.at
	}
}

type synAnswer struct {
	outcome Outcome
	at      time.Time
	mtu     int // with TooBig: the path MTU the error carried
	// staleAck is the ack number of an out-of-window ACK (see TCPSYN).
	staleAck uint32
}

// TCPSYNConfig configures NewTCPSYN.
type TCPSYNConfig struct {
	// Source is the address to send from and to bind to; its family is
	// the engine's.
	Source netip.Addr
	// PortBase and Ports: the engine reserves up to Ports source ports,
	// scanning upwards from PortBase and skipping ports in use.
	PortBase uint16
	Ports    int
	// Sized opens what ProbeSized hears a signalled smaller path MTU
	// with: a raw ICMP socket and the route cache. Without it a sized
	// probe that meets one reads as lost.
	Sized  bool
	Logger *slog.Logger
}

// Check reports every field out of range to bad, by field name: source,
// ports. NewTCPSYN runs it before it opens anything.
func (c TCPSYNConfig) Check(bad func(field, format string, args ...any)) {
	if !familyOK(c.Source) {
		bad("source", "%s is not an IPv4 or IPv6 address (without zone)", c.Source)
	}
	if c.Ports <= 0 || int(c.PortBase)+c.Ports > 65536 {
		bad("ports", "%d source ports from %d do not fit below 65536", c.Ports, c.PortBase)
	}
}

// Validate is Check with the problems joined.
func (c TCPSYNConfig) Validate() error { return joinChecks(c.Check) }

// NewTCPSYN opens the raw socket and reserves the source ports. It needs
// CAP_NET_RAW. Run must be called to read replies.
func NewTCPSYN(cfg TCPSYNConfig) (*TCPSYN, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("tcp_syn: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	// Scan at most twice the wanted ports, so a busy range does not make
	// the engine wander over the whole port space.
	span := min(2*cfg.Ports, 65536-int(cfg.PortBase))
	t := &TCPSYN{src: cfg.Source, base: cfg.PortBase, log: cfg.Logger}
	t.encoders.New = func() any { return newSYNEncoder() }
	sock, err := openTCPRaw(cfg.Source, cfg.PortBase, uint16(span))
	if err != nil {
		return nil, err
	}
	t.sock = sock
	for i := 0; i < span && len(t.free) < cfg.Ports; i++ {
		port := cfg.PortBase + uint16(i)
		if err := sock.reserve(port); err != nil {
			cfg.Logger.Debug("source port in use, skipped", "port", port, "err", err)
			continue
		}
		t.free = append(t.free, port)
	}
	if len(t.free) < cfg.Ports {
		sock.close()
		return nil, fmt.Errorf("tcp_syn: reserved only %d of %d source ports in %d..%d (others in use)", len(t.free), cfg.Ports, cfg.PortBase, int(cfg.PortBase)+span-1)
	}
	// Slots up to the last reserved port only, not the whole span
	// scanned: with no port in use that is half of it (2,048 of 4,096
	// slots at maxTargets 256 x 8 flows).
	t.slots = make([]synSlot, int(t.free[len(t.free)-1]-cfg.PortBase)+1)
	for _, port := range t.free {
		s := &t.slots[port-cfg.PortBase]
		s.reserved, s.ch = true, make(chan synAnswer, 1)
	}
	// Hand ports out from the low end first: deterministic flows.
	for i, j := 0, len(t.free)-1; i < j; i, j = i+1, j-1 {
		t.free[i], t.free[j] = t.free[j], t.free[i]
	}
	if !cfg.Sized {
		return t, nil
	}
	if t.mtus, err = newRouteMTU(); err != nil {
		cfg.Logger.Debug("path MTU cache unreadable", "err", err)
	}
	if t.tooBig, err = openTooBigRaw(cfg.Source); err != nil {
		cfg.Logger.Debug("no socket for packet-too-big errors: a sized probe that meets a signalling smaller MTU may count as lost", "err", err)
	}
	return t, nil
}

// AllocPorts takes n reserved source ports for a target's flows.
func (t *TCPSYN) AllocPorts(n int) ([]uint16, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n > len(t.free) {
		return nil, fmt.Errorf("tcp_syn: %d source ports wanted, %d free", n, len(t.free))
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
	}
	return out, nil
}

// FreePorts returns ports taken with AllocPorts.
func (t *TCPSYN) FreePorts(ports []uint16) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.free = append(t.free, ports...)
}

// Probe sends one SYN from sport to t and waits up to timeout for the
// answer. Probes on the same source port must not overlap.
func (t *TCPSYN) Probe(ctx context.Context, target Target, sport uint16, timeout time.Duration) Result {
	return t.probe(ctx, target, sport, timeout, 0)
}

// ProbeSized is Probe with the SYN padded to size bytes of IP packet
// (at most MaxProbeSize), IPv4's Don't Fragment set as on every SYN:
// over the flow's own 5-tuple, so its ECMP path, it asks whether a
// packet of that size gets through. A link of smaller MTU whose router
// sends no "fragmentation needed" (or "packet too big") drops it
// silently: a PMTU black hole. A size above the route's device MTU
// fails locally (EMSGSIZE): no data.
func (t *TCPSYN) ProbeSized(ctx context.Context, target Target, sport uint16, timeout time.Duration, size int) Result {
	return t.probe(ctx, target, sport, timeout, size)
}

func (t *TCPSYN) probe(ctx context.Context, target Target, sport uint16, timeout time.Duration, size int) Result {
	i := int(sport) - int(t.base)
	if i < 0 || i >= len(t.slots) || !t.slots[i].reserved {
		return Result{Outcome: LocalError, Reason: "config", Err: fmt.Errorf("tcp_syn: source port %d is not reserved", sport)}
	}
	if !sameFamily(t.src, target.Addr) {
		return Result{Outcome: LocalError, Reason: "config", Err: errOtherFamily("tcp_syn", t.src, target.Addr)}
	}
	s := &t.slots[i]
	s.mu.Lock()
	for s.trace != nil {
		end := s.traceEnd
		s.mu.Unlock()
		select {
		case <-end:
		case <-ctx.Done():
			return Result{Outcome: LocalError, Reason: "canceled", Err: ctx.Err()}
		}
		s.mu.Lock()
	}
	if s.active {
		s.mu.Unlock()
		return Result{Outcome: LocalError, Reason: "busy", Err: fmt.Errorf("tcp_syn: a probe from port %d is still in flight", sport)}
	}
	select { // drop an answer that raced in after the last probe ended
	case <-s.ch:
	default:
	}
	stale, nStale := s.staleRSTs(target.Addr, target.Port, time.Now())
	s.active, s.dst, s.dport, s.seq, s.pad = true, target.Addr, target.Port, rand.Uint32(), synPadding(t.src, size)
	s.lastDst, s.lastDport = target.Addr, target.Port
	seq := s.seq
	s.mu.Unlock()
	var answer synAnswer
	lost := false
	defer func() {
		s.mu.Lock()
		s.active = false
		if s.idle != nil {
			close(s.idle)
			s.idle = nil
		}
		if answer.outcome != LocalError && answer.outcome != TooBig { // neither reached the target
			s.settle(seq, answer, lost)
		}
		s.mu.Unlock()
	}()

	enc := t.encoders.Get().(*synEncoder)
	var err error
	for _, old := range stale[:nStale] {
		if err = t.send(enc, synPacket{src: t.src, dst: target.Addr, sport: sport, dport: target.Port, seq: old + 1, ttl: 64, ipID: uint16(old), rst: true}); err != nil {
			break
		}
	}
	s.mu.Lock()
	s.sentAt = time.Now()
	sentAt := s.sentAt
	s.mu.Unlock()
	if err == nil {
		err = t.send(enc, synPacket{src: t.src, dst: target.Addr, sport: sport, dport: target.Port, seq: seq, ttl: 64, ipID: uint16(seq), size: size})
	}
	t.encoders.Put(enc)
	if err != nil && size > 0 && errors.Is(err, syscall.EMSGSIZE) {
		// The local path is smaller: a Service VIP DNATed onto an
		// overlay device of smaller MTU, where the node itself says
		// "fragmentation needed" (a path MTU the kernel learnt does not
		// stop a probe: IP_PMTUDISC_PROBE). Said, so no loss; the MTU
		// when the route cache has it.
		mtu := t.mtus.get(t.src, target.Addr)
		if mtu >= size {
			mtu = 0
		}
		answer.outcome = TooBig
		return Result{Outcome: TooBig, MTU: mtu}
	}
	if err != nil {
		answer.outcome = LocalError
		return Result{Outcome: LocalError, Reason: sendReason(err), Err: fmt.Errorf("tcp_syn send to %s: %w", target.Addr, err)}
	}
	// Only the probe in flight touches the timer (s.active excludes a
	// second one), and s.mu orders one probe's use before the next's.
	if s.timer == nil {
		s.timer = time.NewTimer(timeout)
	} else {
		s.timer.Reset(timeout)
	}
	defer s.timer.Stop()
	select {
	case answer = <-s.ch:
		if answer.outcome == TooBig {
			return Result{Outcome: TooBig, MTU: answer.mtu}
		}
		return Result{Outcome: answer.outcome, RTT: answer.at.Sub(sentAt)}
	case <-s.timer.C:
		lost = true
		if size > 0 {
			// The raw socket takes the ICMP "too big" for our SYN and
			// the kernel caches the path MTU it carries: the network
			// said why, so this is no loss.
			if mtu := t.mtus.get(t.src, target.Addr); mtu > 0 && mtu < size {
				lost = false
				answer.outcome = TooBig
				return Result{Outcome: TooBig, MTU: mtu}
			}
		}
		return Result{Outcome: Lost}
	case <-ctx.Done():
		answer.outcome = LocalError
		return Result{Outcome: LocalError, Reason: "canceled", Err: ctx.Err()}
	}
}

func (t *TCPSYN) send(enc *synEncoder, p synPacket) error {
	b, err := enc.encode(p)
	if err != nil {
		return err
	}
	return t.sock.send(b, p.dst)
}

// Run reads replies until ctx is cancelled or the engine is closed.
func (t *TCPSYN) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, t.Close)
	defer stop()
	if t.tooBig != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			t.readTooBig(ctx)
		}()
		defer func() { <-done }()
	}
	dec := newTCPDecoder()
	buf := make([]byte, 1500)
	for {
		n, at, err := t.sock.recv(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, errClosed) {
				return nil
			}
			t.RecvErrors.Add(1)
			t.log.Warn("tcp_syn receive", "err", err)
			time.Sleep(10 * time.Millisecond) // a persistent error must not spin
			continue
		}
		t.deliver(dec, buf[:n], at)
	}
}

// deliver matches one received packet against the probes in flight.
func (t *TCPSYN) deliver(dec *tcpDecoder, pkt []byte, at time.Time) {
	r, err := dec.decode(pkt)
	if err != nil {
		t.Malformed.Add(1)
		return
	}
	i := int(r.dport) - int(t.base)
	if r.dst != t.src || i < 0 || i >= len(t.slots) || !t.slots[i].reserved {
		t.Foreign.Add(1)
		return
	}
	s := &t.slots[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trace != nil && !s.active {
		s.trace.tcpAnswer(r, at)
		return
	}
	if !s.active {
		t.Late.Add(1)
		return
	}
	if r.src != s.dst || r.sport != s.dport {
		t.Foreign.Add(1)
		return
	}
	a := synAnswer{at: at}
	switch {
	case r.syn && r.ackFlag && r.ack == s.seq+1:
		a.outcome = OK
	case r.rst && (!r.ackFlag || r.ack == s.seq+1 || r.ack == s.seq+1+s.pad):
		a.outcome = Refused
	case r.ackFlag && !r.syn && !r.rst && r.ack != s.seq+1 && r.ack != s.seq+1+s.pad:
		// An out-of-window ACK from a stale half-open entry (see TCPSYN).
		a.outcome, a.staleAck = OK, r.ack
	default:
		t.Late.Add(1) // a SYN-ACK for an earlier probe of this flow
		return
	}
	s.active = false
	select {
	case s.ch <- a:
	default:
		t.Duplicate.Add(1)
	}
}

// readTooBig reads path MTU discovery's errors until the engine closes,
// and answers the sized probe each quotes.
func (t *TCPSYN) readTooBig(ctx context.Context) {
	buf := make([]byte, 1500)
	for {
		n, at, err := t.tooBig.recv(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, errClosed) {
				return
			}
			t.RecvErrors.Add(1)
			time.Sleep(10 * time.Millisecond) // a persistent error must not spin
			continue
		}
		q, mtu, ok := decodeTooBig(buf[:n])
		if !ok || q.src != t.src {
			continue // another process's, or not a TCP quote
		}
		t.answerTooBig(q, mtu, at)
	}
}

// answerTooBig ends the probe in flight that q quotes with TooBig.
func (t *TCPSYN) answerTooBig(q icmpQuote, mtu int, at time.Time) {
	i := int(q.sport) - int(t.base)
	if i < 0 || i >= len(t.slots) || !t.slots[i].reserved {
		return
	}
	s := &t.slots[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active || s.dst != q.dst || s.dport != q.dport || s.seq != q.seq {
		return // a trace's, or a probe already over
	}
	s.active = false
	select {
	case s.ch <- synAnswer{outcome: TooBig, at: at, mtu: mtu}:
	default:
	}
}

// Close releases the socket and the reserved ports. It is safe to call
// more than once.
func (t *TCPSYN) Close() {
	t.closeOnce.Do(func() {
		if t.sock != nil {
			t.sock.close()
		}
		if t.tooBig != nil {
			t.tooBig.close()
		}
		t.mtus.close()
	})
}
