package matrix

import (
	"fmt"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix/matrixsim"
)

func TestHopRack(t *testing.T) {
	t.Parallel()
	m, err := New(Config{Hops: testHops})
	must(t, err)
	for _, tc := range []struct{ firstHop, want string }{
		{"192.0.2.1", "tor1"},          // listed: its device name
		{"203.0.113.203", "lb1"},       // a CIDR entry covers it
		{"192.0.2.99", "192.0.2.99"},   // not listed: the address
		{"2001:db8::1", "2001:db8::1"}, // either family
		{"::ffff:192.0.2.1", "tor1"},   // mapped, as Hops resolves it
		{"", ""},                       // none reported
		{"unknown", ""},                // no address
	} {
		if got := m.hopRack(tc.firstHop); got != tc.want {
			t.Errorf("hopRack(%q) = %q, want %q", tc.firstHop, got, tc.want)
		}
	}
}

// TestRacks: a rack label wins over inference, a node without one is in
// the rack its first hop names, a pod is in its node's rack whatever its
// own first hop (its node), and stale agents are left out.
func TestRacks(t *testing.T) {
	t.Parallel()
	m, err := New(Config{GroupBy: "rack", Hops: testHops, Window: time.Minute})
	must(t, err)
	node := func(name, rack, firstHop string, targets ...api.Target) api.Observations {
		o := report(name, rack, targets...)
		if rack == "" {
			o.Agent.Labels = nil
		}
		o.Agent.FirstHop = firstHop
		return o
	}
	unlabelled := func(tg api.Target, labels map[string]string) api.Target {
		tg.Labels = labels
		return tg
	}
	pod := node("p1", "", "198.51.100.77", unlabelled(target("p2", "", 10, 0, 0), map[string]string{"node": "b1"}))
	pod.Agent.Class, pod.Agent.Labels = "pod", map[string]string{"node": "b1"}
	pod.Targets[0].Class, pod.Targets[0].Path = "pod", "pod_to_pod"
	for _, o := range []api.Observations{
		node("a1", "r1", "192.0.2.1"),
		node("a2", "", "192.0.2.1", unlabelled(target("b1", "", 10, 1, 0), nil), target("c9", "r9", 10, 0, 0)),
		node("b1", "", "198.51.100.1"),
		node("c1", "", "192.0.2.99"),
		node("x1", "", ""),
		pod,
	} {
		must(t, m.Observe(t0, o))
	}
	must(t, m.Observe(t0.Add(-2*time.Minute), node("s1", "", "192.0.2.1")))
	want := map[string]string{"a1": "r1", "a2": "tor1", "b1": "tor2", "c1": "192.0.2.99", "p1": "tor2"}
	if got := m.Racks(); !maps.Equal(got, want) {
		t.Errorf("Racks() = %v, want %v", got, want)
	}
	// The per-rack view: a pod target is in its node's rack, a target
	// labelled by its prober in that rack.
	groups := map[string]bool{}
	for _, c := range m.Snapshot(t0).Groups {
		groups[c.Source+" -> "+c.Target] = true
	}
	for _, w := range []string{"tor1 -> tor2", "tor1 -> r9", "tor2 -> tor2"} {
		if !groups[w] {
			t.Errorf("snapshot groups %v lack %s", groups, w)
		}
	}
	if new(Matrix).Racks() == nil {
		t.Error("Racks() of an empty matrix is nil, want empty")
	}
}

// rackN is a rack label of matrixsim: rack2 is behind tor2.
var rackN = regexp.MustCompile(`\brack(\d+)\b`)

// TestUnlabelledRacksLocalizeAsLabelled: agents with no rack label but
// with first hops give the suspects, tiers and per-rack matrix that
// labelled ones do, rack names aside (a label's "rack2" is the first
// hop's "tor2"), traced or not. Without either, untraced paths leave the
// tier stage nothing to group.
func TestUnlabelledRacksLocalizeAsLabelled(t *testing.T) {
	t.Parallel()
	faults := []matrixsim.Fault{
		{Kind: matrixsim.Healthy},
		{Kind: matrixsim.ToRLoss, Loss: 0.05, Rack: 1},
		{Kind: matrixsim.SpineLoss, Loss: 0.05, Spine: 1},
		{Kind: matrixsim.HostNIC, Loss: 0.1, Rack: 2, Node: 1},
	}
	run := func(cfg matrixsim.Config, ft matrixsim.Fault, edit func(*api.Observations)) (string, string) {
		fab, err := matrixsim.New(cfg)
		must(t, err)
		m, err := New(Config{GroupBy: "rack", Hops: fab.Hops()})
		must(t, err)
		for _, o := range fab.Observations(ft, 7) {
			if edit != nil {
				edit(&o)
			}
			must(t, m.Observe(t0, o))
		}
		var d, g strings.Builder
		for _, s := range m.Localize(t0).Suspects {
			fmt.Fprintf(&d, "%s/%s %s %.4f %.4f %s; ", s.Kind, s.Name, s.Evidence.Stage, s.Score, s.EstimatedLoss, s.Evidence.Detail)
		}
		for _, c := range m.Snapshot(t0).Groups {
			fmt.Fprintf(&g, "%s->%s %s %d/%d; ", c.Source, c.Target, c.Path, c.Lost, c.Sent)
		}
		return d.String(), g.String()
	}
	rename := func(s string) string { return rackN.ReplaceAllString(s, "tor$1") }
	for _, untraced := range []bool{false, true} {
		cfg := matrixsim.Config{Racks: 8, NodesPerRack: 4, Spines: 2, FlowsPerTarget: 4, ProbesPerFlow: 30, Background: 1e-4, Untraced: untraced}
		for _, ft := range faults {
			t.Run(fmt.Sprintf("%s untraced=%v", ft.Kind, untraced), func(t *testing.T) {
				labelled, lgroups := run(cfg, ft, nil)
				nl := cfg
				nl.NoRackLabels = true
				inferred, igroups := run(nl, ft, nil)
				if rename(labelled) != inferred {
					t.Errorf("suspects differ:\nlabelled: %s\ninferred: %s", labelled, inferred)
				}
				if rename(lgroups) != igroups {
					t.Errorf("groups differ:\nlabelled: %s\ninferred: %s", lgroups, igroups)
				}
				if ft.Kind != matrixsim.Healthy && inferred == "" {
					t.Error("no suspect")
				}
				if ft.Kind == matrixsim.SpineLoss && untraced {
					if !strings.HasPrefix(inferred, "tier/spine tier") {
						t.Errorf("untraced lossy spine: %s, want the tier above the ToRs", inferred)
					}
					none, _ := run(nl, ft, func(o *api.Observations) { o.Agent.FirstHop = "" })
					if none != "" {
						t.Errorf("without racks the tier stage found %s: nothing groups the nodes", none)
					}
				}
			})
		}
	}
}
