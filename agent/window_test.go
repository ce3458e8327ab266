package agent

import (
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/probe"
)

func TestWindowStats(t *testing.T) {
	t.Parallel()
	w := newWindow(10*time.Second, time.Second) // 12 slots
	t0 := time.Unix(1000, 0)
	// 20 probes, one per second: only the last 10 s count, and the ring
	// (12 slots) has overwritten the oldest.
	for i := range 20 {
		r := probe.Result{Outcome: probe.OK, RTT: time.Duration(i+1) * time.Millisecond}
		if i%4 == 0 {
			r = probe.Result{Outcome: probe.Lost}
		}
		if i == 19 {
			r = probe.Result{Outcome: probe.LocalError}
		}
		w.add(t0.Add(time.Duration(i)*time.Second), r)
	}
	st, rtts := w.stats(t0.Add(10*time.Second), nil)
	// i = 10..19: lost at 12, 16; local error at 19; answered 10,11,13,14,15,17,18.
	if st.Sent != 9 || st.Lost != 2 || st.Errors != 1 {
		t.Fatalf("sent %d lost %d errors %d, want 9 2 1", st.Sent, st.Lost, st.Errors)
	}
	if len(rtts) != 7 {
		t.Fatalf("%d rtts, want 7", len(rtts))
	}
	if got, want := st.LossRatio, 2.0/9; got != want {
		t.Errorf("loss ratio %v, want %v", got, want)
	}
	if st.RTTP50 != 0.015 || st.RTTP99 != 0.019 {
		t.Errorf("p50 %v p99 %v, want 0.015 0.019", st.RTTP50, st.RTTP99)
	}
	if st.LastResult != "local_error" {
		t.Errorf("last %q", st.LastResult)
	}
	if st, _ := newWindow(time.Minute, time.Second).stats(t0, nil); st.Sent != 0 || st.LastResult != "" || st.LossRatio != 0 {
		t.Errorf("empty window: %+v", st)
	}
}

// TestWindowGrows checks that a ring grows only while its oldest sample
// is inside the window, up to window/interval samples and never past
// maxWindowSamples, and that growing keeps every sample in order.
func TestWindowGrows(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	cases := []struct {
		name           string
		span, interval time.Duration
		every          time.Duration // between samples
		n              int
		wantRing       int
	}{
		{"probed at the interval", time.Minute, time.Second, time.Second, 200, 62},
		{"probed every 8.2s under the rate cap", time.Minute, time.Second, 8200 * time.Millisecond, 100, minWindowSamples},
		{"probed every 4s", time.Minute, time.Second, 4 * time.Second, 100, 16},
		{"a short interval hits the cap", time.Hour, 10 * time.Millisecond, 10 * time.Millisecond, 10000, maxWindowSamples},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWindow(tc.span, tc.interval)
			for i := range tc.n {
				w.add(t0.Add(time.Duration(i)*tc.every), probe.Result{Outcome: probe.OK, RTT: time.Duration(i+1) * time.Microsecond})
			}
			if len(w.ring) != tc.wantRing {
				t.Errorf("ring of %d samples, want %d", len(w.ring), tc.wantRing)
			}
			// Every sample in the window is still there, newest last.
			end := t0.Add(time.Duration(tc.n-1) * tc.every)
			since := end.Add(-tc.span)
			want := min(int(tc.span/tc.every)+1, tc.n, maxWindowSamples)
			st, rtts := w.stats(since, nil)
			if int(st.Sent) != want || len(rtts) != want {
				t.Fatalf("%d sent, %d rtts in the window; want %d", st.Sent, len(rtts), want)
			}
			if got := rtts[0]; got != (time.Duration(tc.n) * time.Microsecond).Seconds() {
				t.Errorf("newest rtt %v, want the last sample's", got)
			}
		})
	}
}

// TestWindowPathMTU: a "too big" is sent, not lost, and the window says
// the smallest path MTU any said while it is inside the window; one
// without an MTU (unknown) changes nothing.
func TestWindowPathMTU(t *testing.T) {
	t.Parallel()
	w := newWindow(10*time.Second, time.Second)
	t0 := time.Unix(1000, 0)
	for i, r := range []probe.Result{
		{Outcome: probe.TooBig, MTU: 1300}, // leaves the window
		{Outcome: probe.TooBig, MTU: 1400},
		{Outcome: probe.OK, RTT: time.Millisecond},
		{Outcome: probe.TooBig},
		{Outcome: probe.TooBig, MTU: 1450},
	} {
		w.add(t0.Add(time.Duration(i)*5*time.Second), r)
	}
	st, _ := w.stats(t0.Add(time.Second), nil)
	if st.Sent != 4 || st.Lost != 0 || st.PathMTU != 1400 {
		t.Errorf("sent %d lost %d path MTU %d, want 4 0 1400", st.Sent, st.Lost, st.PathMTU)
	}
	if st, _ := w.stats(t0.Add(12*time.Second), nil); st.PathMTU != 1450 {
		t.Errorf("path MTU %d once 1,400 left the window, want 1450", st.PathMTU)
	}
	if got := api.MinPathMTU(0, 1500); got != 1500 {
		t.Errorf("MinPathMTU(0, 1500) = %d", got)
	}
	if got := api.MinPathMTU(1280, 0); got != 1280 {
		t.Errorf("MinPathMTU(1280, 0) = %d", got)
	}
}
