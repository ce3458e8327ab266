package peers

import (
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netprober/prober/api"
)

// TestWriteWindow: at most n writes in any minute, a change's writes
// taken together or not at all.
func TestWriteWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	w := writeWindow{n: 5}
	for i, tc := range []struct {
		at   time.Duration
		k    int
		want bool
	}{
		{0, 2, true}, {time.Second, 2, true}, {2 * time.Second, 2, false}, {3 * time.Second, 1, true},
		{59 * time.Second, 1, false}, {60 * time.Second, 2, true}, {61 * time.Second, 2, true}, {62 * time.Second, 1, false},
		{10 * time.Minute, 5, true}, {10 * time.Minute, 1, false},
	} {
		if got := w.take(t0.Add(tc.at), tc.k); got != tc.want {
			t.Errorf("step %d: take(%v, %d) = %v, want %v", i, tc.at, tc.k, got, tc.want)
		}
	}
	if len(w.at) > w.n {
		t.Errorf("the window holds %d writes, bound %d", len(w.at), w.n)
	}
}

// TestReporterPlan: what each suspect kind asks of which object, in
// which order, and when a condition clears.
func TestReporterPlan(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r := NewReporter(nil, ReporterConfig{WritesPerMinute: 6, Now: func() time.Time { return now }}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r.SetPeers([]Peer{{Name: "n1", Class: ClassNode}, {Name: "n2", Class: ClassNode}, {Name: "n3", Class: ClassNode}, {Name: "prober-pod-x", Class: ClassPod}})
	r.state["n3"] = corev1.ConditionTrue // left by an earlier matrix
	r.seen["n3"] = now
	suspect := func(kind, name string, score float64) api.Suspect {
		return api.Suspect{Kind: kind, Name: name, Score: score, Evidence: api.Evidence{Detail: "its own links lose"}}
	}
	r.Observe(api.Diagnosis{Suspects: []api.Suspect{
		suspect(api.KindHost, "n1", 0.4), suspect(api.KindDataplane, "n2", 0.5),
		suspect(api.KindHost, "prober-pod-x", 0.3),           // a pod's own: no Node of its name
		suspect(api.KindLB, "default/web@198.51.100.7", 0.2), // a LoadBalancer's ingress IP
		suspect(api.KindLB, "apiserver-lb", 0.2),             // no object
		suspect(api.KindDevice, "spine1", 0.9),               // the fabric's
		suspect(api.KindHost, "n3", 0.05),                    // not listed
	}})
	got := r.plan(now)
	want := []change{
		{node: "n2", status: corev1.ConditionTrue, f: finding{reason: ReasonDataplaneLoss}},
		{node: "n1", status: corev1.ConditionTrue, f: finding{reason: ReasonHostLoss}},
		{service: "default/web", f: finding{reason: ReasonServiceLoss}},
	}
	if len(got) != len(want) {
		t.Fatalf("plan %+v, want %d changes", got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.node != w.node || g.service != w.service || g.status != w.status || g.f.reason != w.f.reason {
			t.Errorf("change %d: %+v, want %+v", i, g, w)
		}
	}
	if got[0].writes() != 2 || got[2].writes() != 1 {
		t.Errorf("writes: a condition %d, a Service's Event %d; want 2 and 1", got[0].writes(), got[2].writes())
	}
	if m := got[1].f.message; m != "prober: its own links lose (score 0.40)" {
		t.Errorf("message %q", m)
	}
	// Listed again: the Service's Event is not asked twice; n3 clears a
	// minute after this matrix last saw it listed, not before.
	r.pending = map[string]finding{}
	r.state["n1"], r.state["n2"] = corev1.ConditionTrue, corev1.ConditionTrue
	r.Observe(api.Diagnosis{Suspects: []api.Suspect{suspect(api.KindLB, "default/web", 0.3)}})
	if got := r.plan(now.Add(59 * time.Second)); len(got) != 0 {
		t.Errorf("59 s on: %+v, want nothing", got)
	}
	got = r.plan(now.Add(ClearAfter))
	if len(got) != 3 {
		t.Fatalf("a minute on: %+v, want n1, n2 and n3 cleared", got)
	}
	for _, c := range got {
		if c.status != corev1.ConditionFalse || c.f.reason != ReasonNoProblem {
			t.Errorf("a minute on: %+v, want a clear", c)
		}
	}
}

// TestTruncate: cut on a character's boundary.
func TestTruncate(t *testing.T) {
	t.Parallel()
	if got := truncate("ab€", 3); got != "ab" {
		t.Errorf("truncate %q", got)
	}
	if got := truncate("abc", 3); got != "abc" {
		t.Errorf("truncate %q", got)
	}
}
