package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/netprober/prober/config"
	"github.com/netprober/prober/probe"
)

// TestDeployConfigs checks the agent and matrix configurations embedded in
// deploy/daemonset.yaml's ConfigMaps as `--check` would: a config that
// drifts from the code fails here, not in a cluster.
func TestDeployConfigs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile(`\n  ([a-z-]+\.yaml): \|\n((?:    .*\n|\n)+)`).FindAllStringSubmatch(string(b), -1)
	seen := map[string]bool{}
	for _, m := range blocks {
		name, body := m[1], unindent(m[2], 4)
		seen[name] = true
		var err error
		if name == "matrix.yaml" {
			var c *config.Matrix
			if c, err = config.ParseMatrix(name, []byte(body)); err == nil && !c.KubernetesDiscovery() {
				t.Errorf("%s: the deployed matrix should find agents by discovery", name)
			}
		} else {
			var c *config.Agent
			if c, err = config.ParseAgent(name, []byte(body)); err == nil && !c.KubernetesDiscovery() {
				t.Errorf("%s: the deployed agents should find peers by discovery", name)
			}
			// Seed 001 is why prober exists: only http2_ping rides an
			// established flow.
			if err == nil && !slices.Contains(c.Probing.Protocols, probe.ProtocolHTTP2Ping) {
				t.Errorf("%s: protocols %v, want http2_ping on", name, c.Probing.Protocols)
			}
		}
		if err != nil {
			t.Errorf("deploy/daemonset.yaml: %v", err)
		}
	}
	if !seen["matrix.yaml"] || len(seen) < 2 {
		t.Errorf("found configs %v; want the matrix's and the agents'", seen)
	}
}

func unindent(s string, n int) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if len(l) >= n {
			lines[i] = l[n:]
		}
	}
	return strings.Join(lines, "\n")
}
