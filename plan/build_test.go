package plan

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/netprober/prober/api"
)

// byAgent returns every agent's targets by its name.
func byAgent(ps *Plans) map[string][]Peer {
	out := map[string][]Peer{}
	for _, a := range ps.Agents() {
		out[a.Name] = ps.Targets(a.Name)
	}
	return out
}

// checkPlans fails on a self-target, a duplicate target, a plan over cap,
// or a target that is not among the input peers.
func checkPlans(t *testing.T, all []Peer, ps *Plans, maxTargets int) {
	t.Helper()
	known := map[string]bool{}
	for _, p := range all {
		known[p.Name] = true
	}
	for from, ts := range byAgent(ps) {
		if len(ts) > maxTargets {
			t.Errorf("%s has %d targets, cap %d", from, len(ts), maxTargets)
		}
		seen := map[string]bool{}
		for _, p := range ts {
			if p.Name == from {
				t.Errorf("%s probes itself", from)
			}
			if seen[p.Name] {
				t.Errorf("%s probes %s twice", from, p.Name)
			}
			if !known[p.Name] {
				t.Errorf("%s probes unknown %s", from, p.Name)
			}
			seen[p.Name] = true
		}
	}
}

func TestBuildIndependentOfOrder(t *testing.T) {
	t.Parallel()
	all := agents(300, "rack", 2)
	want := Build(all, BuildOptions{})
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		shuffled := slices.Clone(all)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := Build(shuffled, BuildOptions{}); !reflect.DeepEqual(got, want) {
			t.Fatal("plans depend on input order")
		}
	}
	if got := Build(all, BuildOptions{}); !reflect.DeepEqual(got, want) {
		t.Fatal("two builds of the same input differ")
	}
}

func TestBuildDuplicates(t *testing.T) {
	t.Parallel()
	all := agents(50, "zone", 1)
	want := Build(all, BuildOptions{})
	dup := append(slices.Clone(all), all[3], all[17], all[len(all)-1])
	got := Build(dup, BuildOptions{})
	if !reflect.DeepEqual(got, want) {
		t.Fatal("duplicate peers change the plans")
	}
	checkPlans(t, dup, got, DefaultMaxTargets)
}

func TestBuildCapWithManyLBs(t *testing.T) {
	t.Parallel()
	for _, lbs := range []int{10, 200, 250, 255, 256, 400} {
		t.Run(fmt.Sprint(lbs), func(t *testing.T) {
			t.Parallel()
			all := agents(500, "rack", lbs)
			ps := Build(all, BuildOptions{})
			checkPlans(t, all, ps, DefaultMaxTargets)
			for from, ts := range byAgent(ps) {
				if got := len(ts); got > DefaultMaxTargets {
					t.Fatalf("%s: %d targets", from, got)
				}
			}
		})
	}
	// A small cap: LBs come first and still count; with pod agents each
	// layer gets half of the rest, less the pod's own node: (9-3-1)/2.
	all := agents(100, "none", 3)
	ps := Build(all, BuildOptions{MaxTargets: 9})
	checkPlans(t, all, ps, 9)
	if got := ps.Targets("n00000"); len(got) != 3+2 || got[0].Class != "lb" {
		t.Errorf("n00000 with cap 9 and 3 LBs: %v, want 3 LBs then 2 nodes", names(got))
	}
}

func TestBuildTiny(t *testing.T) {
	t.Parallel()
	node := func(name, group string) Peer { return Peer{Name: name, Class: "node", Group: group} }
	for _, tc := range []struct {
		name  string
		peers []Peer
		want  map[string][]string
	}{
		{"empty", nil, map[string][]string{}},
		{"one", []Peer{node("a", "")}, map[string][]string{"a": nil}},
		{"two", []Peer{node("a", ""), node("b", "")}, map[string][]string{"a": {"b"}, "b": {"a"}}},
		{"three", []Peer{node("a", ""), node("b", ""), node("c", "")},
			map[string][]string{"a": {"b", "c"}, "b": {"a", "c"}, "c": {"a", "b"}}},
		{"four", []Peer{node("a", ""), node("b", ""), node("c", ""), node("d", "")},
			map[string][]string{"a": {"b", "c", "d"}, "b": {"a", "c", "d"}, "c": {"a", "b", "d"}, "d": {"a", "b", "c"}}},
		{"group of one", []Peer{node("a", "r1"), node("b", "r1"), node("c", "r2")},
			map[string][]string{"a": {"b", "c"}, "b": {"a"}, "c": {"a", "b"}}},
		{"lb only", []Peer{{Name: "vip", Class: "lb"}}, map[string][]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ps := Build(tc.peers, BuildOptions{})
			checkPlans(t, tc.peers, ps, DefaultMaxTargets)
			got := map[string][]string{}
			for from, ts := range byAgent(ps) {
				n := names(ts)
				slices.Sort(n)
				got[from] = n
			}
			if !maps.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("plans = %v, want %v", got, tc.want)
			}
			if ps.RotationRounds != 1 {
				t.Errorf("rotation rounds = %d, want 1", ps.RotationRounds)
			}
		})
	}
}

func TestBuildPodAgent(t *testing.T) {
	t.Parallel()
	all := agents(100, "rack", 1)
	ps := Build(all, BuildOptions{})
	checkPlans(t, all, ps, DefaultMaxTargets)
	node, pod := ps.Targets("n00042"), ps.Targets("agent-n00042")
	// vip, its node, its node's node targets, then pods.
	want := append([]string{"vip0", "n00042"}, names(node[1:])...)
	if got := names(pod[:len(want)]); !slices.Equal(got, want) {
		t.Errorf("pod agent's first targets = %v, want %v", got, want)
	}
	for _, p := range pod[len(want):] {
		if p.Class != "pod" {
			t.Errorf("pod agent's target %s after its nodes is a %s", p.Name, p.Class)
		}
	}
	for _, p := range node {
		if p.Class == "pod" {
			t.Errorf("node agent probes pod %s", p.Name)
		}
	}
}

// TestBuildRotation: one group per node (a label unique to each node) is
// more group pairs than the budget: a full rotation covers them all, and
// every round stays within the cap and keeps everyone probed.
func TestBuildRotation(t *testing.T) {
	t.Parallel()
	var all []Peer
	for i := range 600 {
		all = append(all, Peer{Name: fmt.Sprintf("n%04d", i), Class: "node", Group: fmt.Sprintf("g%04d", i)})
	}
	opts := BuildOptions{MaxTargets: 32}
	c := measure(all, opts)
	if c.rounds < 2 {
		t.Fatalf("rotation rounds = %d, want more than 1", c.rounds)
	}
	if c.pairsUncovered > 0 || c.neverProbed > 0 || c.noForeign > 0 || c.mostTargets > 32 {
		t.Errorf("over a rotation: %+v", c)
	}
	for r := range c.rounds {
		opts.Round = r
		ps := Build(all, opts)
		checkPlans(t, all, ps, 32)
		probed := map[string]bool{}
		for _, ts := range byAgent(ps) {
			for _, p := range ts {
				probed[p.Name] = true
			}
		}
		if len(probed) != len(all) {
			t.Errorf("round %d: %d of %d probed", r, len(probed), len(all))
		}
	}
	if a, b := Build(all, BuildOptions{MaxTargets: 32, Round: -1}), Build(all, BuildOptions{MaxTargets: 32, Round: c.rounds - 1}); !reflect.DeepEqual(a, b) {
		t.Error("round -1 is not the last round")
	}
}

// TestBuildUnbalanced: a group of one beside a big group must probe the
// whole big group from outside; past the cap it does so over a rotation.
func TestBuildUnbalanced(t *testing.T) {
	t.Parallel()
	all := []Peer{{Name: "lonely", Class: "node", Group: "r2"}}
	for i := range 1000 {
		all = append(all, Peer{Name: fmt.Sprintf("n%04d", i), Class: "node", Group: "r1"})
	}
	c := measure(all, BuildOptions{})
	if c.pairsUncovered > 0 || c.neverProbed > 0 || c.noForeign > 0 || c.mostTargets > DefaultMaxTargets || c.fewestProbers < 3 {
		t.Errorf("over a rotation of %d rounds: %+v", c.rounds, c)
	}
}

func TestRingOffsets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n, k int
		want []int
	}{
		{1, 0, nil}, {2, 1, []int{1}}, {4, 3, []int{1, 2, 3}}, {5, 3, []int{1, 2, 4}},
		{12, 8, []int{1, 2, 4, 8, 3, 5, 6, 7}}, {1000, 8, []int{1, 2, 4, 8, 16, 32, 64, 128}},
	} {
		if got := ringOffsets(tc.n, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("ringOffsets(%d, %d) = %v, want %v", tc.n, tc.k, got, tc.want)
		}
	}
}

func BenchmarkBuild10000(b *testing.B) {
	all := agents(10000, "rack", 1)
	b.ReportAllocs()
	for b.Loop() {
		Build(all, BuildOptions{})
	}
}

func BenchmarkBuild10000None(b *testing.B) {
	all := agents(10000, "none", 1)
	b.ReportAllocs()
	for b.Loop() {
		Build(all, BuildOptions{})
	}
}

// BenchmarkBuild10000Singletons: a label unique to every node, the
// worst case for group pairs (about 10^8, rotated).
func BenchmarkBuild10000Singletons(b *testing.B) {
	all := agents(10000, "none", 1)
	for i := range all {
		if all[i].Class == "pod" {
			all[i].Group = all[i].Node
		} else {
			all[i].Group = all[i].Name
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		p := Build(all, BuildOptions{})
		b.ReportMetric(float64(p.RotationRounds), "rounds")
	}
}

func TestFNV64a(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "n00001", "agent-n00001"} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := fnv64a(s), h.Sum64(); got != want {
			t.Errorf("fnv64a(%q) = %x, want %x", s, got, want)
		}
	}
}

// TestBuildSpread: node_to_node probes between groups leave from, and
// land on, many members of each group, not member 0 of each.
func TestBuildSpread(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		labels string
		want   int // at least half a group
	}{{"rack", 40 / 2}, {"zone", 333 / 2}} {
		all := agents(1000, tc.labels, 0)
		class, group := map[string]string{}, map[string]string{}
		for _, p := range all {
			class[p.Name], group[p.Name] = p.Class, p.Group
		}
		out, in := map[string]map[string]bool{}, map[string]map[string]bool{}
		add := func(m map[string]map[string]bool, g, name string) {
			if m[g] == nil {
				m[g] = map[string]bool{}
			}
			m[g][name] = true
		}
		for from, ts := range byAgent(Build(all, BuildOptions{})) {
			for _, p := range ts {
				if class[from] == "node" && p.Class == "node" && group[from] != p.Group {
					add(out, group[from], from)
					add(in, p.Group, p.Name)
				}
			}
		}
		for g := range in {
			if len(out[g]) < tc.want || len(in[g]) < tc.want {
				t.Errorf("%s %s: %d members probe other groups, %d are probed from them; want %d or more",
					tc.labels, g, len(out[g]), len(in[g]), tc.want)
			}
		}
	}
}

// TestBuildDNSEndpoints: the cluster DNS's endpoints (pods with a DNS
// question, no agent) are probed by every agent, node and pod, as the
// VIPs are, and plan nothing themselves.
func TestBuildDNSEndpoints(t *testing.T) {
	t.Parallel()
	all := agents(40, "rack", 1)
	q := &api.DNSQuestion{Query: "kubernetes.default.svc.cluster.local."}
	all = append(all,
		Peer{Name: "kube-system/kube-dns", Class: api.ClassLB, Address: "192.0.2.53", Port: 53, DNS: q},
		Peer{Name: "kube-system/coredns-a", Class: api.ClassPod, Address: "192.0.2.54", Port: 53, Node: "n00003", DNS: q})
	ps := Build(all, BuildOptions{})
	checkPlans(t, all, ps, DefaultMaxTargets)
	plans := byAgent(ps)
	if _, ok := plans["kube-system/coredns-a"]; ok {
		t.Error("a DNS endpoint has a plan of its own")
	}
	for name, ts := range plans {
		for _, dns := range []string{"kube-system/kube-dns", "kube-system/coredns-a"} {
			if !slices.Contains(names(ts), dns) {
				t.Errorf("%s does not ask %s", name, dns)
			}
		}
	}
	if len(plans) != 80 {
		t.Errorf("%d agents, want the 40 nodes' and 40 pods'", len(plans))
	}
}
