package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/netprober/prober/config"
	"github.com/netprober/prober/peers"
)

func TestPlanTargets(t *testing.T) {
	t.Parallel()
	var ps []peers.Peer
	for i := range 10 {
		ps = append(ps, peers.Peer{Name: fmt.Sprintf("n%d", i), Class: peers.ClassNode, Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}), Port: 9808})
		ps = append(ps, peers.Peer{Name: fmt.Sprintf("p%d", i), Class: peers.ClassPod, Addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)}), Port: 9808})
	}
	ps = append(ps, peers.Peer{Name: "default/kubernetes", Class: peers.ClassLB, Addr: netip.MustParseAddr("203.0.113.1"), Port: 443})

	all := planTargets("n3", netip.MustParseAddr("192.0.2.4"), ps, 256)
	if len(all) != 20 {
		t.Fatalf("uncapped: %d targets, want 20 (21 peers minus self)", len(all))
	}
	if all[0].Name != "default/kubernetes" {
		t.Errorf("first target %s, want the LB first", all[0].Name)
	}
	for _, tg := range all {
		if tg.Name == "n3" {
			t.Error("the agent plans itself")
		}
	}
	// A pod agent leaves its own pod out by address.
	for _, tg := range planTargets("p5", netip.MustParseAddr("198.51.100.6"), ps, 256) {
		if tg.Name == "p5" {
			t.Error("the pod agent plans its own pod")
		}
	}
	// Capped: LB, then nodes and pods alternately, from a per-agent offset.
	capped := planTargets("n3", netip.MustParseAddr("192.0.2.4"), ps, 5)
	classes := ""
	for _, tg := range capped {
		classes += tg.Class[:1]
	}
	if classes != "lnpnp" {
		t.Errorf("capped classes %q, want lnpnp", classes)
	}
	other := planTargets("n7", netip.MustParseAddr("192.0.2.8"), ps, 5)
	if capped[1].Name == other[1].Name && capped[2].Name == other[2].Name {
		t.Errorf("agents n3 and n7 start at the same peers %s, %s: no spread", capped[1].Name, capped[2].Name)
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
