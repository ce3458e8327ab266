package matrix

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/api"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// report builds one agent's observations: to each target, tcp_syn with
// the given sent/lost.
func report(agent, rack string, targets ...api.Target) api.Observations {
	return api.Observations{
		SchemaVersion: api.SchemaVersion,
		Agent:         api.Agent{Name: agent, Class: "node", Labels: map[string]string{"rack": rack}},
		Time:          t0,
		WindowSeconds: 60,
		Targets:       targets,
	}
}

func target(name, rack string, sent, lost uint64, rtt float64) api.Target {
	return api.Target{
		Name: name, Class: "node", Path: "node_to_node",
		Labels: map[string]string{"rack": rack},
		Protocols: []api.Protocol{{
			Protocol: "tcp_syn",
			Stats:    api.Stats{Sent: sent, Lost: lost, RTTP50: rtt, RTTP99: 2 * rtt},
		}},
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := New(Config{
		K:          -1,
		Hops:       map[string]string{"192.0.2.1/24": "tor1", "nonsense": "x", "192.0.2.9": ""},
		Thresholds: Thresholds{Alpha: 2, Healthy: 5, MinScore: -7},
	})
	if err == nil {
		t.Fatal("New accepted a bad config")
	}
	for _, want := range []string{"k: -1", "hops.192.0.2.1/24: host bits set", "hops.nonsense:", "hops.192.0.2.9: device name is empty", "thresholds.alpha", "thresholds.healthy", "thresholds.minScore"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestHopsLongestPrefix(t *testing.T) {
	t.Parallel()
	m, err := New(Config{Hops: map[string]string{
		"198.51.100.0/24": "lb1",
		"198.51.100.7":    "spine2",
		"198.51.0.0/16":   "core",
		"2001:db8::/32":   "v6net",
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ addr, want string }{
		{"198.51.100.7", "spine2"},
		{"198.51.100.8", "lb1"},
		{"198.51.3.1", "core"},
		{"::ffff:198.51.100.7", "spine2"},
		{"2001:db8::1", "v6net"},
		{"203.0.113.1", ""},
	} {
		if got := m.deviceOfAddr(tc.addr); got != tc.want {
			t.Errorf("device of %s = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

func TestSnapshotRollsUpAndIgnoresStale(t *testing.T) {
	t.Parallel()
	m, err := New(Config{GroupBy: "rack", K: 2, Window: time.Minute, Cells: true})
	if err != nil {
		t.Fatal(err)
	}
	must(t, m.Observe(t0, report("a1", "r1", target("b1", "r2", 100, 10, 0.001), target("a2", "r1", 100, 0, 0.0005))))
	must(t, m.Observe(t0, report("a2", "r1", target("b1", "r2", 300, 0, 0.003))))
	// b1 reported long ago: no data, not loss.
	must(t, m.Observe(t0.Add(-time.Hour), report("b1", "r2", target("a1", "r1", 100, 100, 0))))

	s := m.Snapshot(t0)
	if got := len(s.Cells); got != 3 {
		t.Fatalf("cells = %d, want 3 (stale agent excluded): %+v", got, s.Cells)
	}
	var r1r2 *Cell
	for i, c := range s.Groups {
		if c.Source == "r2" {
			t.Errorf("stale agent b1 contributed group cell %+v", c)
		}
		if c.Source == "r1" && c.Target == "r2" {
			r1r2 = &s.Groups[i]
		}
	}
	if r1r2 == nil {
		t.Fatalf("no r1->r2 group cell in %+v", s.Groups)
	}
	if r1r2.Sent != 400 || r1r2.Lost != 10 || r1r2.LossRatio != 10.0/400 {
		t.Errorf("r1->r2 = %+v, want sent 400 lost 10", *r1r2)
	}
	// (90*0.001 + 300*0.003) / 390
	if want := (90*0.001 + 300*0.003) / 390; abs(r1r2.RTTP50-want) > 1e-12 {
		t.Errorf("r1->r2 p50 = %v, want %v", r1r2.RTTP50, want)
	}
	if len(s.Worst) != 1 || s.Worst[0].Source != "a1" || s.Worst[0].Target != "b1" {
		t.Errorf("worst = %+v, want only a1->b1", s.Worst)
	}
	states := map[string]string{}
	for _, a := range s.Agents {
		states[a.Name] = a.State
	}
	if states["b1"] != StateStale || states["a1"] != StateFresh {
		t.Errorf("agent states = %v", states)
	}

	m.Forget("a1")
	if s := m.Snapshot(t0); len(s.Cells) != 1 {
		t.Errorf("after Forget(a1): cells = %+v, want only a2's", s.Cells)
	}
}

// TestSnapshotPathMTU: a group cell carries the smallest path MTU its
// pairs were told, a pair told none leaving it as it is.
func TestSnapshotPathMTU(t *testing.T) {
	t.Parallel()
	m, err := New(Config{GroupBy: "rack", Window: time.Minute, Cells: true})
	if err != nil {
		t.Fatal(err)
	}
	told := func(name string, mtu uint16) api.Target {
		tg := target(name, "r2", 10, 0, 0.001)
		tg.Protocols[0].Protocol, tg.Protocols[0].PathMTU = api.ProtocolTCPSYNMTU, mtu
		return tg
	}
	must(t, m.Observe(t0, report("a1", "r1", told("b1", 1400), told("b2", 0))))
	must(t, m.Observe(t0, report("a2", "r1", told("b1", 1300))))
	s := m.Snapshot(t0)
	if len(s.Groups) != 1 || s.Groups[0].PathMTU != 1300 || s.Groups[0].Lost != 0 {
		t.Errorf("groups %+v, want one r1->r2 cell, path MTU 1300, nothing lost", s.Groups)
	}
	mtus := map[string]uint16{}
	for _, c := range s.Cells {
		mtus[c.Source+"->"+c.Target] = c.PathMTU
	}
	if want := map[string]uint16{"a1->b1": 1400, "a1->b2": 0, "a2->b1": 1300}; !maps.Equal(mtus, want) {
		t.Errorf("pairs' path MTUs %v, want %v", mtus, want)
	}
}

func TestObserveReplacesAndSanitizes(t *testing.T) {
	t.Parallel()
	m, _ := New(Config{Cells: true})
	must(t, m.Observe(t0, report("a1", "r1", target("b1", "r2", 100, 50, 0))))
	must(t, m.Observe(t0, report("a1", "r1", target("b2", "r2", 10, 20, 0))))
	s := m.Snapshot(t0)
	if len(s.Cells) != 1 || s.Cells[0].Target != "b2" || s.Cells[0].Lost != 10 || s.Cells[0].LossRatio != 1 {
		t.Errorf("cells = %+v, want the second report only, lost clamped to sent", s.Cells)
	}
	if err := m.Observe(t0, api.Observations{}); err == nil || !strings.Contains(err.Error(), "agent.name") {
		t.Errorf("Observe(empty) error = %v, want one naming agent.name", err)
	}
	if err := m.Observe(t0, api.Observations{SchemaVersion: 99, Agent: api.Agent{Name: "x"}}); err == nil || !strings.Contains(err.Error(), "schemaVersion 99") {
		t.Errorf("Observe(v99) error = %v", err)
	}
}

func TestSnapshotDeterministic(t *testing.T) {
	t.Parallel()
	build := func(order []int) []byte {
		m, _ := New(Config{GroupBy: "rack", Cells: true})
		reports := []api.Observations{
			report("a1", "r1", target("b1", "r2", 100, 3, 0.001), target("c1", "r3", 50, 1, 0.002)),
			report("b1", "r2", target("a1", "r1", 100, 2, 0.001)),
			report("c1", "r3", target("a1", "r1", 70, 0, 0.001), target("b1", "r2", 70, 7, 0.001)),
		}
		for _, i := range order {
			must(t, m.Observe(t0, reports[i]))
		}
		b, err := json.Marshal(m.Snapshot(t0))
		must(t, err)
		return b
	}
	a, b := build([]int{0, 1, 2}), build([]int{2, 0, 1})
	if string(a) != string(b) {
		t.Errorf("snapshot depends on report order:\n%s\n%s", a, b)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
