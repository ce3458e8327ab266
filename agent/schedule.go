package agent

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/netprober/prober/probe"
)

// scheduler starts every flow's probes from one goroutine: a heap of
// flows ordered by when each is due, a goroutine per probe only while it
// is in flight. A goroutine per flow, each sleeping on its own timer and
// waiting in the rate limiter, cost 1,640 goroutines at a 5,000-node plan
// (164 targets x (icmp + 8 tcp_syn flows + http2_ping)), 13 MiB of stacks
// and a thread wakeup for every probe (issue 14). The scheduler wakes at
// most once per slack while probes are due and starts every probe due
// within slack at once, so probes leave in small bursts and the process
// sleeps in between.
//
// A flow is in the heap while it waits and out of it while its probe is
// in flight, so a flow never has two probes in flight. Its next probe is
// due an interval (±10% jitter) after this one was due, or as soon as
// this one ends if that is later: under the probe-rate cap every flow is
// due, the heap serves the longest-waiting first, and a new target waits
// its turn behind them rather than before them.
type scheduler struct {
	a        *Agent
	interval time.Duration
	// slack is how early a probe may start to join a burst: a tenth of
	// the interval, at most 100ms.
	slack time.Duration
	// start starts a dispatched probe, with s.mu held: Agent.probe on a
	// goroutine of its own; tests record it instead.
	start func(*flowTask)

	mu    sync.Mutex
	tasks taskHeap
	// blocked: every in-flight slot (Agent.sem) was taken at the last
	// dispatch, so the next probe to end must wake the scheduler.
	blocked bool
	wake    chan struct{} // buffered 1: a new head of the heap, or a free slot
}

// flowTask is one (target, protocol, flow) of the schedule.
type flowTask struct {
	t     *target
	proto probe.Protocol
	flow  int
	// sent counts its probes: one in probing.pmtu.every of a tcp_syn
	// flow's is sent large.
	sent  int
	due   time.Time
	index int // in tasks; -1 while its probe is in flight or after remove
}

// maxSlack bounds how early a probe may start to join a burst.
const maxSlack = 100 * time.Millisecond

func newScheduler(a *Agent) *scheduler {
	interval := a.cfg.Interval
	return &scheduler{a: a, interval: interval, slack: min(maxSlack, interval/10), start: func(ft *flowTask) { go a.probe(ft) }, wake: make(chan struct{}, 1)}
}

// add schedules t's flows, the first probe of each at a random offset
// within an interval so that a thousand targets added at once do not fire
// in step.
func (s *scheduler) add(t *target, tasks []*flowTask) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	t.tasks = tasks
	for _, ft := range tasks {
		ft.due = now.Add(rand.N(s.interval))
		heap.Push(&s.tasks, ft)
	}
	s.signal()
}

// remove takes t's flows out of the schedule. Its probes in flight end on
// their own (t.cancel ends them) and are not scheduled again.
func (s *scheduler) remove(t *target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.stopped = true
	for _, ft := range t.tasks {
		if ft.index >= 0 {
			heap.Remove(&s.tasks, ft.index)
		}
	}
}

// done schedules ft's next probe after its probe that was due at due
// ended at end.
func (s *scheduler) done(ft *flowTask, end time.Time) {
	next := ft.due.Add(s.interval + time.Duration((rand.Float64()-0.5)*0.2*float64(s.interval)))
	s.mu.Lock()
	defer s.mu.Unlock()
	if ft.t.stopped {
		return
	}
	ft.due = next
	if end.After(next) {
		ft.due = end
	}
	heap.Push(&s.tasks, ft)
	if ft.index == 0 || s.blocked {
		s.blocked = false
		s.signal()
	}
}

// signal wakes run; s.mu is held.
func (s *scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run starts probes as they fall due until ctx ends. Run waits for the
// probes through Agent.probeWG, not here.
func (s *scheduler) run(ctx context.Context) error {
	timer := time.NewTimer(s.dispatch())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-timer.C:
		}
		timer.Reset(s.dispatch())
	}
}

// idle is how long run sleeps with nothing due: until woken.
const idle = time.Hour

// dispatch starts every probe due within slack that the in-flight bound
// and the rate limit allow, and returns how long to sleep before the next
// one.
func (s *scheduler) dispatch() time.Duration {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.tasks) > 0 {
		ft := s.tasks[0]
		if wait := ft.due.Sub(now); wait > s.slack {
			return wait
		}
		select {
		case s.a.sem <- struct{}{}:
		default:
			s.blocked = true
			return idle
		}
		if !s.a.limiter.AllowN(now, 1) {
			<-s.a.sem
			// Sleep until a token is back, and at least slack so that
			// probes leave in bursts, not one per token.
			need := (1 - s.a.limiter.TokensAt(now)) / float64(s.a.limiter.Limit())
			return max(s.slack, time.Duration(need*float64(time.Second)))
		}
		heap.Pop(&s.tasks)
		ft.t.inflight.Add(1)
		s.a.probeWG.Add(1)
		s.start(ft)
	}
	return idle
}

// probe sends ft's probe, records its result and schedules the next.
func (a *Agent) probe(ft *flowTask) {
	defer a.probeWG.Done()
	t := ft.t
	defer t.inflight.Done()
	ctx := t.ctx
	var r probe.Result
	pt := probe.Target{Addr: t.Addr, Port: t.Port}
	timeout := a.cfg.Timeout
	proto := ft.proto
	ft.sent++
	if every := a.cfg.PMTU.Every; proto == probe.ProtocolTCPSYN && t.mtuSize > 0 && ft.sent%every == 0 {
		proto = probe.ProtocolTCPSYNMTU
	}
	switch proto {
	case probe.ProtocolICMP:
		r = t.eng.icmp.Probe(ctx, pt, timeout)
	case probe.ProtocolTCPSYN:
		r = t.eng.syn.Probe(ctx, pt, t.ports[ft.flow], timeout)
	case probe.ProtocolTCPSYNMTU:
		r = t.eng.syn.ProbeSized(ctx, pt, t.ports[ft.flow], timeout, t.mtuSize)
	case probe.ProtocolHTTP2Ping:
		r = a.pingHTTP2(ctx, t)
	case probe.ProtocolDNSUDP, probe.ProtocolDNSTCP:
		r = t.dns[ft.proto][ft.flow].Probe(ctx, timeout)
	}
	<-a.sem
	if ctx.Err() != nil {
		return // cancelled mid-probe: neither sent nor lost, nor scheduled again
	}
	a.record(t, proto, ft.flow, r)
	a.sched.done(ft, time.Now())
}

// taskHeap orders flows by when they are due (container/heap).
type taskHeap []*flowTask

func (h taskHeap) Len() int           { return len(h) }
func (h taskHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h taskHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *taskHeap) Push(x any) {
	ft := x.(*flowTask)
	ft.index = len(*h)
	*h = append(*h, ft)
}
func (h *taskHeap) Pop() any {
	old := *h
	ft := old[len(old)-1]
	old[len(old)-1] = nil
	ft.index = -1
	*h = old[:len(old)-1]
	return ft
}
