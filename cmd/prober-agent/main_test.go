package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoKubernetesClient: the agent's binary links no k8s.io package,
// the reason it exists (the client's pages and init cost every node's
// agent about 18 MiB; docs/performance.md).
func TestNoKubernetesClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps listed %d packages: not the agent's", len(deps))
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "k8s.io/") {
			t.Errorf("prober-agent links %s: it must not import peers or client-go", p)
		}
	}
}
