package testbed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/api"
)

// capture writes every agent's report as it stands, with the matrix's
// hops, in the form of matrix/testdata/cluster (its README), so that a
// wrong diagnosis seen once on the cluster can be replayed and kept as a
// test: `go test ./matrix -run TestCaptureFile -args -capture FILE`. It
// goes to $PROBER_CLUSTER_CAPTURE, else the system's temporary
// directory, and is logged; a capture that fails is logged, never fatal.
func (r *clusterRun) capture(ctx context.Context, t *testing.T, what string) {
	t.Helper()
	c := struct {
		Hops         map[string]string  `json:"hops"`
		Observations []api.Observations `json:"observations"`
	}{Hops: r.c.Fabric.Hops()}
	agents, err := r.agentAddrs(ctx)
	if err != nil {
		t.Logf("capture %s: %v", what, err)
		return
	}
	for _, a := range agents {
		key, err := r.agentKey(ctx, a.name, a.pod)
		if err != nil {
			t.Logf("capture %s: %v", what, err)
			continue
		}
		var obs api.Observations
		if err := getJSON(ctx, r.c, "http://"+netip.AddrPortFrom(a.addr, 9808).String()+api.ObservationsPath, &obs, key); err != nil {
			t.Logf("capture %s: %s: %v", what, a.name, err)
			continue
		}
		c.Observations = append(c.Observations, obs)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Logf("capture %s: %v", what, err)
		return
	}
	dir := os.Getenv("PROBER_CLUSTER_CAPTURE")
	if dir == "" {
		dir = os.TempDir()
	}
	name := filepath.Join(dir, fmt.Sprintf("prober-capture-%s-%s.json", strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(what)), time.Now().UTC().Format("20060102T150405")))
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Logf("capture %s: %v", what, err)
		return
	}
	t.Logf("capture of %d agents' reports (%s) written to %s", len(c.Observations), what, name)
}

type agentAddr struct {
	name, pod string
	addr      netip.Addr
}

// agentAddrs lists every prober pod's agent: a node agent by its node's
// name, a pod agent by its pod's, each at its pod's IP.
func (r *clusterRun) agentAddrs(ctx context.Context) ([]agentAddr, error) {
	out, err := r.c.Kubectl(ctx, "-n", "prober", "get", "pods", "-l", "app.kubernetes.io/component in (node,pod)", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.metadata.labels.app\.kubernetes\.io/component} {.spec.nodeName} {.status.podIP}{"\n"}{end}`)
	if err != nil {
		return nil, fmt.Errorf("prober pods: %v: %s", err, out)
	}
	var as []agentAddr
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 {
			continue
		}
		addr, err := netip.ParseAddr(f[3])
		if err != nil {
			continue
		}
		a := agentAddr{name: f[0], pod: f[0], addr: addr}
		if f[1] == "node" {
			a.name = f[2]
		}
		as = append(as, a)
	}
	return as, nil
}
