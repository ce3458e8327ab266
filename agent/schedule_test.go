package agent

import (
	"container/heap"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/netprober/prober/probe"
)

// testScheduler is a scheduler over a bare agent: slots probes in flight,
// a limiter with burst tokens that never refills, and a start that only
// records what was started.
func testScheduler(slots, burst int) (*scheduler, *startLog) {
	a := &Agent{
		cfg:     Config{Interval: time.Second},
		sem:     make(chan struct{}, slots),
		limiter: rate.NewLimiter(rate.Limit(1e-9), burst),
	}
	s := newScheduler(a)
	log := &startLog{}
	s.start = log.add
	return s, log
}

type startLog struct {
	mu      sync.Mutex
	started []*flowTask
}

func (l *startLog) add(ft *flowTask) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started = append(l.started, ft)
}

// tasks adds target name's n flows to s, all overdue, the first most.
func addOverdue(s *scheduler, name string, n int, base time.Time) (*target, []*flowTask) {
	t := &target{Target: Target{Name: name}}
	var fts []*flowTask
	for i := range n {
		fts = append(fts, &flowTask{t: t, proto: probe.ProtocolTCPSYN, flow: i})
	}
	s.add(t, fts)
	s.mu.Lock()
	for i, ft := range fts {
		ft.due = base.Add(time.Duration(i) * time.Millisecond)
	}
	heap.Init(&s.tasks)
	s.mu.Unlock()
	return t, fts
}

// TestSchedulerDispatch: the longest-due flows start first, as many as
// the in-flight slots and the rate limit allow; a probe that ends frees
// a slot and wakes the scheduler; a removed target's flows never start
// again, in the heap or in flight.
func TestSchedulerDispatch(t *testing.T) {
	t.Parallel()
	s, log := testScheduler(2, 3)
	past := time.Now().Add(-time.Minute)
	ta, as := addOverdue(s, "a", 2, past.Add(10*time.Millisecond))
	_, bs := addOverdue(s, "b", 2, past)
	<-s.wake // add's

	if wait := s.dispatch(); wait != idle || !s.blocked {
		t.Fatalf("with both slots taken: wait %v, blocked %v; want %v, true", wait, s.blocked, idle)
	}
	if len(log.started) != 2 || log.started[0] != bs[0] || log.started[1] != bs[1] {
		t.Fatalf("started %v, want b's two flows (due first)", names(log.started))
	}
	for _, ft := range log.started {
		if ft.index != -1 {
			t.Errorf("%s/%d in flight but still in the heap at %d", ft.t.Name, ft.flow, ft.index)
		}
	}

	// b's first probe ends: its slot frees, the blocked scheduler wakes,
	// and the flow is due again an interval (±10%) after it was due.
	<-s.a.sem
	due := bs[0].due
	s.done(bs[0], time.Now())
	select {
	case <-s.wake:
	default:
		t.Error("a probe ended while every slot was taken, and the scheduler was not woken")
	}
	if lo, hi := due.Add(900*time.Millisecond), time.Now(); bs[0].due.Before(lo) || bs[0].due.After(hi) {
		// It was due a minute ago, so its next probe is due as this one ended.
		t.Errorf("next due %v, want between %v and now %v", bs[0].due, lo, hi)
	}

	// One token is left: a's first flow (the longest due now) takes it
	// and the last free slot.
	if wait := s.dispatch(); wait != idle || !s.blocked {
		t.Errorf("slots taken again: wait %v, blocked %v; want %v, true", wait, s.blocked, idle)
	}
	if len(log.started) != 3 || log.started[2] != as[0] {
		t.Fatalf("started %v, want b/0 b/1 a/0", names(log.started))
	}
	// b/1 ends and frees a slot, but no token is left: a/1, due longest,
	// waits, and the scheduler sleeps at least slack.
	<-s.a.sem
	s.done(bs[1], time.Now())
	if wait := s.dispatch(); wait < s.slack || wait == idle {
		t.Errorf("out of tokens: wait %v, want at least slack %v", wait, s.slack)
	}
	if len(log.started) != 3 || as[1].index < 0 {
		t.Fatalf("started %v with no token left; a/1 at heap index %d", names(log.started), as[1].index)
	}

	// a leaves: a/1 leaves the heap, a/0 (in flight) is not scheduled again.
	s.remove(ta)
	<-s.a.sem
	s.done(as[0], time.Now())
	if !ta.stopped {
		t.Error("removed target not marked stopped")
	}
	for _, ft := range s.tasks {
		if ft.t == ta {
			t.Errorf("removed target's flow %d still scheduled", ft.flow)
		}
	}
	if as[1].index != -1 || as[0].index != -1 {
		t.Errorf("a's flows at heap indices %d, %d after remove", as[0].index, as[1].index)
	}
	if len(s.tasks) != 2 || bs[0].index < 0 || bs[1].index < 0 {
		t.Errorf("heap holds %v, want b's two flows", names(s.tasks))
	}
}

// TestTaskHeap keeps flows in due order through pushes and removals.
func TestTaskHeap(t *testing.T) {
	t.Parallel()
	var h taskHeap
	t0 := time.Unix(1000, 0)
	var fts []*flowTask
	for i, off := range []int{5, 1, 9, 3, 7, 2, 8} {
		ft := &flowTask{flow: i, due: t0.Add(time.Duration(off) * time.Second)}
		fts = append(fts, ft)
		heap.Push(&h, ft)
	}
	heap.Remove(&h, fts[2].index) // due +9
	heap.Remove(&h, fts[5].index) // due +2
	var got []int
	for h.Len() > 0 {
		ft := heap.Pop(&h).(*flowTask)
		if ft.index != -1 {
			t.Errorf("popped flow %d keeps index %d", ft.flow, ft.index)
		}
		got = append(got, int(ft.due.Sub(t0)/time.Second))
	}
	want := []int{1, 3, 5, 7, 8}
	if len(got) != len(want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("popped %v, want %v", got, want)
		}
	}
}

func names(fts []*flowTask) []string {
	var out []string
	for _, ft := range fts {
		out = append(out, ft.t.Name+"/"+string(rune('0'+ft.flow)))
	}
	return out
}

// TestSchedulerAllocs guards BenchmarkSchedulerProbe's 0 allocs/op:
// at 200 probes/s the schedule must not feed the garbage collector.
func TestSchedulerAllocs(t *testing.T) {
	s, _ := testScheduler(1, 1)
	s.a.limiter = rate.NewLimiter(rate.Inf, 1)
	var ft *flowTask
	s.start = func(f *flowTask) { ft = f }
	addOverdue(s, "t", 10, time.Now().Add(-1000*time.Hour))
	if n := testing.AllocsPerRun(1000, func() {
		s.dispatch()
		<-s.a.sem
		s.done(ft, ft.due)
	}); n != 0 {
		t.Errorf("%v allocs per scheduled probe, want 0", n)
	}
}

// BenchmarkSchedulerProbe is the scheduler's own cost per probe: taking
// the longest-due of 1,640 flows (a 5,000-node plan) off the heap with
// its slot and token, and putting it back when its probe ends. The probe
// itself, its goroutine and the clock's wait are left out.
func BenchmarkSchedulerProbe(b *testing.B) {
	// One in-flight slot: each dispatch starts exactly one probe.
	s, _ := testScheduler(1, 1)
	s.a.limiter = rate.NewLimiter(rate.Inf, 1)
	var ft *flowTask
	s.start = func(f *flowTask) { ft = f }
	past := time.Now().Add(-1000 * time.Hour)
	for i := range 164 {
		addOverdue(s, "t"+itoa(i), 10, past)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		// One probe: dispatch starts the longest-due flow; done puts it back.
		ft = nil
		s.dispatch()
		if ft == nil {
			b.Fatal("no flow started")
		}
		<-s.a.sem
		s.done(ft, ft.due)
	}
}
