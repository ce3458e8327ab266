package main

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/netprober/prober/agent"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/peers"
)

func TestPlanTargets(t *testing.T) {
	t.Parallel()
	// 3 racks of 4 nodes with a pod each, and the API server's LB. RFC 5737
	// addresses: nothing is dialled.
	var ps []peers.Peer
	for r := 1; r <= 3; r++ {
		for n := 1; n <= 4; n++ {
			labels := map[string]string{"rack": fmt.Sprintf("r%d", r), "node": fmt.Sprintf("n%d%d", r, n)}
			ps = append(ps,
				peers.Peer{Name: fmt.Sprintf("n%d%d", r, n), Class: peers.ClassNode, Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(10*r + n)}), Port: 9808, Labels: labels, Agent: true},
				peers.Peer{Name: fmt.Sprintf("p%d%d", r, n), Class: peers.ClassPod, Addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(10*r + n)}), Port: 9808, Labels: labels, Agent: true})
		}
	}
	api := peers.HTTP2{Mode: peers.HTTP2TLS, CAFile: "/ca.crt", ServerName: peers.APIServerName}
	ps = append(ps, peers.Peer{Name: "default/kubernetes", Class: peers.ClassLB, Addr: netip.MustParseAddr("203.0.113.1"), Port: 443,
		Backends: []string{"n11", "n21"}, HTTP2: api})
	names := func(ts []agent.Target) []string {
		var out []string
		for _, tg := range ts {
			out = append(out, tg.Name)
		}
		return out
	}

	// Node agent n12 (index 1 in r1): the LB, its rack's other nodes, node
	// 1 of r2 and r3; no pods.
	node := names(planTargets("n12", "node", "n12", netip.MustParseAddr("192.0.2.12"), ps, 256))
	if want := []string{"default/kubernetes", "n11", "n13", "n14", "n22", "n32"}; !slices.Equal(node, want) {
		t.Errorf("node agent n12 plans %v, want %v", node, want)
	}
	// Pod agent p12 on n12: the nodes n12 plans and n12 itself (pod->node),
	// then the pods the same way (pod->pod); never its own pod.
	pod := names(planTargets("p12", "pod", "n12", netip.MustParseAddr("198.51.100.12"), ps, 256))
	if want := []string{"default/kubernetes", "n11", "n13", "n14", "n22", "n32", "n12", "p11", "p13", "p14", "p22", "p32"}; !slices.Equal(pod, want) {
		t.Errorf("pod agent p12 plans %v, want %v", pod, want)
	}
	// The same snapshot in another order gives the same plan.
	rev := slices.Clone(ps)
	slices.Reverse(rev)
	if got := names(planTargets("n12", "node", "n12", netip.MustParseAddr("192.0.2.12"), rev, 256)); !slices.Equal(got, node) {
		t.Errorf("reordered snapshot: %v, want %v", got, node)
	}
	// An lb target carries its backends and how it is pinged; node
	// targets the class default.
	for _, tg := range planTargets("n12", "node", "n12", netip.MustParseAddr("192.0.2.12"), ps, 256) {
		want := agent.HTTP2{}
		var backends []string
		if tg.Class == peers.ClassLB {
			want, backends = agent.HTTP2{Mode: config.HTTP2TLS, CAFile: "/ca.crt", ServerName: peers.APIServerName}, []string{"n11", "n21"}
		}
		if tg.HTTP2 != want || !slices.Equal(tg.Backends, backends) {
			t.Errorf("target %s: http2 %+v, backends %v; want %+v, %v", tg.Name, tg.HTTP2, tg.Backends, want, backends)
		}
	}
	// Capped: the LB first.
	if got := names(planTargets("n12", "node", "n12", netip.MustParseAddr("192.0.2.12"), ps, 2)); !slices.Equal(got, []string{"default/kubernetes", "n11"}) {
		t.Errorf("capped at 2: %v", got)
	}
}

func TestOwnLabels(t *testing.T) {
	t.Parallel()
	ps := []peers.Peer{
		{Name: "n1", Class: peers.ClassNode, Labels: map[string]string{"node": "n1", "zone": "z1", "rack": "r1", "ready": "unknown"}},
		{Name: "n2", Class: peers.ClassNode, Labels: map[string]string{"node": "n2", "zone": "z2", "rack": "r2"}},
		{Name: "n2", Class: peers.ClassPod, Labels: map[string]string{"node": "n1", "zone": "zp", "rack": "rp"}},
	}
	configured := map[string]string{"node": "n2", "team": "net"}
	got := ownLabels(configured, ps)
	if want := map[string]string{"node": "n2", "team": "net", "zone": "z2", "rack": "r2"}; !maps.Equal(got, want) {
		t.Errorf("node agent on n2: labels %v, want %v (its node's zone and rack only)", got, want)
	}
	if len(configured) != 2 {
		t.Errorf("ownLabels changed the configured labels: %v", configured)
	}
	// Configured labels win; a node not in the snapshot adds nothing.
	if got := ownLabels(map[string]string{"node": "n1", "rack": "mine"}, ps); !maps.Equal(got, map[string]string{"node": "n1", "rack": "mine", "zone": "z1"}) {
		t.Errorf("configured rack: %v", got)
	}
	if got := ownLabels(map[string]string{"node": "n9"}, ps); !maps.Equal(got, map[string]string{"node": "n9"}) {
		t.Errorf("unknown node: %v", got)
	}
}

func TestNewDiscoveryIdentity(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NODE_NAME": "n1", "POD_NAME": "prober-pod-x", "POD_IP": "198.51.100.4"}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg, err := config.ParseAgent("pod.yaml", []byte("class: pod\nlisten: 0.0.0.0:9808\ndiscovery: kubernetes\nkubernetes: {kubeconfig: /nonexistent/kubeconfig}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = newDiscovery(cfg, func(k string) string { return env[k] }, log)
	if err == nil {
		t.Error("a missing kubeconfig was accepted")
	}
	if cfg.Name != "prober-pod-x" || cfg.Source != "198.51.100.4" || cfg.Labels["node"] != "n1" {
		t.Errorf("identity: name %q source %q labels %v", cfg.Name, cfg.Source, cfg.Labels)
	}
	if _, err := newDiscovery(cfg, func(string) string { return "" }, log); err == nil {
		t.Error("missing downward API env accepted")
	}
}

// TestNewDiscoveryAPIServerCA: a node agent that pings the API server
// checks its CA at start, the ServiceAccount's by default; a pod agent,
// which does not ping it, does not.
func TestNewDiscoveryAPIServerCA(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NODE_NAME": "n1", "POD_NAME": "prober-node-x", "POD_IP": "192.0.2.4"}
	getenv := func(k string) string { return env[k] }
	log := slog.New(slog.DiscardHandler)
	parse := func(yaml string) *config.Agent {
		t.Helper()
		cfg, err := config.ParseAgent("agent.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const base = "listen: 0.0.0.0:9808\ndiscovery: kubernetes\nprobing: {protocols: [tcp_syn, http2_ping]}\n"
	if _, err := os.Stat(config.DefaultAPIServerCAFile); err != nil {
		_, err := newDiscovery(parse("class: node\n"+base+"kubernetes: {kubeconfig: /nonexistent/kubeconfig}\n"), getenv, log)
		if err == nil || !strings.Contains(err.Error(), "kubernetes.apiServerCAFile") {
			t.Errorf("node agent without the ServiceAccount CA: %v, want kubernetes.apiServerCAFile named", err)
		}
	}
	for _, yaml := range []string{
		"class: node\n" + base + "kubernetes: {kubeconfig: /nonexistent/kubeconfig, apiServerCAFile: ../../config/testdata/tls/cert.pem}\n",
		"class: pod\n" + base + "kubernetes: {kubeconfig: /nonexistent/kubeconfig}\n",
	} {
		_, err := newDiscovery(parse(yaml), getenv, log)
		if err == nil || strings.Contains(err.Error(), "apiServerCAFile") || !strings.Contains(err.Error(), "kubeconfig") {
			t.Errorf("%s: %v; want past the CA to the missing kubeconfig", yaml, err)
		}
	}
}
