package plan

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/netprober/prober/api"
)

func names(ps []Peer) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func TestGroup(t *testing.T) {
	t.Parallel()
	peers := []Peer{
		{Name: "n1", Class: api.ClassNode, Labels: map[string]string{"rack": "r1", "zone": "z1"}},
		{Name: "n2", Class: api.ClassNode, Labels: map[string]string{"zone": "z1"}},
		{Name: "n3", Class: api.ClassNode, Labels: map[string]string{"zone": "z2"}},
		{Name: "n4", Class: api.ClassNode},
		{Name: "p2", Class: api.ClassPod, Labels: map[string]string{"node": "n2", "zone": "z1"}},
		{Name: "p3", Class: api.ClassPod, Node: "n3"},
		{Name: "p9", Class: api.ClassPod, Labels: map[string]string{"node": "gone", "zone": "z9"}},
		{Name: "vip", Class: api.ClassLB},
	}
	shared := peers[1].Labels
	// n1's label wins over inference; n2 is inferred; n3 has only a zone.
	Group(peers, map[string]string{"n1": "tor9", "n2": "tor2"})
	want := map[string]string{"n1": "r1", "n2": "tor2", "n3": "z2", "n4": "", "p2": "tor2", "p3": "z2", "p9": "z9", "vip": ""}
	for _, p := range peers {
		if p.Group != want[p.Name] {
			t.Errorf("%s: group %q, want %q", p.Name, p.Group, want[p.Name])
		}
	}
	if peers[1].Labels["rack"] != "tor2" || peers[4].Labels["rack"] != "tor2" {
		t.Errorf("inferred rack not written as the rack label: n2 %v, p2 %v", peers[1].Labels, peers[4].Labels)
	}
	if shared["rack"] != "" {
		t.Errorf("Group changed the caller's labels map: %v", shared)
	}
	if peers[5].Node != "n3" || peers[4].Node != "n2" {
		t.Errorf("pod nodes: p2 %q, p3 %q", peers[4].Node, peers[5].Node)
	}
}

func TestAgentPlan(t *testing.T) {
	t.Parallel()
	api1 := &api.PeerHTTP2{Mode: api.HTTP2TLS, ServerName: "kubernetes.default.svc", APIServer: true}
	var all []Peer
	for i := range 6 {
		n := fmt.Sprintf("n%d", i)
		all = append(all, Peer{Name: n, Class: api.ClassNode, Address: fmt.Sprintf("192.0.2.%d", i+1), Group: fmt.Sprint("r", i%2)},
			Peer{Name: "pod-" + n, Class: api.ClassPod, Node: n, Address: fmt.Sprintf("198.51.100.%d", i+1), Group: fmt.Sprint("r", i%2)})
	}
	all = append(all, Peer{Name: "default/kubernetes", Class: api.ClassLB, Address: "203.0.113.1", Port: 443, HTTP2: api1})
	ps := Build(all, BuildOptions{})
	node, ok := ps.Agent("n0")
	if !ok || node.Name != "n0" || node.Version == "" || len(node.Targets) == 0 {
		t.Fatalf("Agent(n0) = %+v, %v", node, ok)
	}
	if _, ok := ps.Agent("default/kubernetes"); ok {
		t.Error("an lb peer has a plan")
	}
	if _, ok := ps.Agent("nobody"); ok {
		t.Error("an unknown name has a plan")
	}
	lb := func(a api.AgentPlan) Peer {
		i := slices.IndexFunc(a.Targets, func(p Peer) bool { return p.Class == api.ClassLB })
		if i < 0 {
			t.Fatalf("%s: no lb target in %v", a.Name, names(a.Targets))
		}
		return a.Targets[i]
	}
	if h := lb(node).HTTP2; h == nil || h.Mode != api.HTTP2TLS {
		t.Errorf("node agent: API server VIP http2 %+v, want tls", h)
	}
	pod, _ := ps.Agent("pod-n0")
	if h := lb(pod).HTTP2; h == nil || h.Mode != api.HTTP2None {
		t.Errorf("pod agent: API server VIP http2 %+v, want none (one connection per node)", h)
	}
	if api1.Mode != api.HTTP2TLS {
		t.Error("Agent changed the shared peer")
	}
	// Same peers in another order: same versions; one address changed:
	// the plans that hold it change version, the others keep theirs.
	rev := slices.Clone(all)
	slices.Reverse(rev)
	again := Build(rev, BuildOptions{})
	for _, a := range ps.Agents() {
		x, _ := ps.Agent(a.Name)
		y, _ := again.Agent(a.Name)
		if x.Version != y.Version {
			t.Errorf("%s: version %s then %s for the same peers", a.Name, x.Version, y.Version)
		}
	}
	moved := slices.Clone(all)
	moved[2].Address = "192.0.2.99" // n1
	after := Build(moved, BuildOptions{})
	changed := 0
	for _, a := range ps.Agents() {
		x, _ := ps.Agent(a.Name)
		y, _ := after.Agent(a.Name)
		holds := slices.Contains(names(x.Targets), "n1") || a.Name == "n1"
		if holds != (x.Version != y.Version) {
			t.Errorf("%s: holds n1 %v, version changed %v", a.Name, holds, x.Version != y.Version)
		}
		if holds {
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("nobody probes n1")
	}
	by := ps.ProbedBy("n1")
	for _, a := range ps.Agents() {
		x, _ := ps.Agent(a.Name)
		if slices.Contains(names(x.Targets), "n1") != slices.Contains(by, a.Name) {
			t.Errorf("ProbedBy(n1) = %v disagrees with %s's targets %v", by, a.Name, names(x.Targets))
		}
	}
}

// TestVersionCoversEveryField: changing any field an agent receives, in
// the agent's own entry, a target or its HTTP/2 settings, changes the
// version; a field added to api.Peer without a line in version fails here.
func TestVersionCoversEveryField(t *testing.T) {
	t.Parallel()
	base := func() api.AgentPlan {
		return api.AgentPlan{Name: "n1", Class: api.ClassNode, Address: "192.0.2.1", Group: "g", Node: "n1",
			Labels: map[string]string{"rack": "r1"},
			Targets: []Peer{{Name: "vip", Class: api.ClassLB, Address: "192.0.2.9", Port: 443, Group: "g", Node: "n2",
				Labels: map[string]string{"rack": "r2"}, Backends: []string{"n2"},
				HTTP2: &api.PeerHTTP2{Mode: api.HTTP2TLS, ServerName: "s", APIServer: true, InsecureSkipVerify: false},
				DNS:   &api.DNSQuestion{Query: "q."}}}}
	}
	want := version(base())
	// change sets field i of the struct v points to to a different value.
	change := func(v reflect.Value, i int) {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Uint16:
			f.SetUint(f.Uint() + 1)
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]string{"rack": "other"}))
		case reflect.Slice:
			if f.Type() == reflect.TypeOf([]string(nil)) {
				f.Set(reflect.ValueOf([]string{"other"}))
				return
			}
			f.Set(reflect.Zero(f.Type())) // Targets: none
		case reflect.Pointer:
			f.Set(reflect.Zero(f.Type())) // HTTP2: the class default; DNS: none
		default:
			t.Fatalf("field %s of kind %s: teach this test to change it", v.Type().Field(i).Name, f.Kind())
		}
	}
	check := func(what string, pick func(*api.AgentPlan) reflect.Value) {
		typ := pick(&api.AgentPlan{Targets: []Peer{{HTTP2: &api.PeerHTTP2{}, DNS: &api.DNSQuestion{}}}}).Type()
		for i := range typ.NumField() {
			if n := typ.Field(i).Name; n == "Version" || what == "Peer" && (n == "Pod" || n == "PodUID") {
				continue // Pods: Plans.Agent never sends them (TestAgentPlanSendsNoPod)
			}
			a := base()
			change(pick(&a), i)
			if version(a) == want {
				t.Errorf("%s.%s changed, the version did not", what, typ.Field(i).Name)
			}
		}
	}
	check("AgentPlan", func(a *api.AgentPlan) reflect.Value { return reflect.ValueOf(a).Elem() })
	check("Peer", func(a *api.AgentPlan) reflect.Value { return reflect.ValueOf(&a.Targets[0]).Elem() })
	check("PeerHTTP2", func(a *api.AgentPlan) reflect.Value { return reflect.ValueOf(a.Targets[0].HTTP2).Elem() })
	check("DNSQuestion", func(a *api.AgentPlan) reflect.Value { return reflect.ValueOf(a.Targets[0].DNS).Elem() })
}

// TestAgentPlanSendsNoPod: the agents' pods are the matrix's to check
// tokens with; a plan carries none, so a peer agent's restart changes no
// other agent's plan.
func TestAgentPlanSendsNoPod(t *testing.T) {
	t.Parallel()
	peers := []Peer{
		{Name: "n1", Class: api.ClassNode, Address: "192.0.2.1", Pod: "prober-node-a", PodUID: "u1"},
		{Name: "n2", Class: api.ClassNode, Address: "192.0.2.2", Pod: "prober-node-b", PodUID: "u2"},
	}
	p := Build(peers, BuildOptions{})
	before, _ := p.Agent("n1")
	peers[1].Pod, peers[1].PodUID = "prober-node-c", "u3"
	after, _ := Build(peers, BuildOptions{}).Agent("n1")
	if len(before.Targets) != 1 || before.Targets[0].Pod != "" || before.Targets[0].PodUID != "" {
		t.Errorf("n1's plan: %+v, want n2 without its pod", before.Targets)
	}
	if before.Version != after.Version {
		t.Error("n2's agent pod changed n1's plan version")
	}
}
