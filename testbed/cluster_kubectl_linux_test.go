package testbed_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
)

// pluginDir makes dir/plugins hold prober as kubectl-prober, the name
// `make build` gives it, for kubectl to find on PATH.
func pluginDir(t *testing.T, dir, prober string) string {
	t.Helper()
	plugins := filepath.Join(dir, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(prober, filepath.Join(plugins, "kubectl-prober")); err != nil {
		t.Fatal(err)
	}
	return plugins
}

// kubectlPlugin runs `kubectl prober` as an operator would while spine
// is lossy, through the real kubectl and a port-forward to the matrix pod:
// status names the spine, who shows a node's agent, its probers and its
// cells.
func (r *clusterRun) kubectlPlugin(ctx context.Context, t *testing.T, spine string) {
	t.Helper()
	start := time.Now()
	run := func(args ...string) string {
		t.Helper()
		out, err := r.c.KubectlPlugin(ctx, r.plugins, append([]string{"prober"}, args...)...)
		if err != nil {
			r.errorf(t, "kubectl prober %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	out := run("status")
	if !strings.Contains(out, "1. device "+spine) {
		r.errorf(t, "kubectl prober status does not name device %s first:\n%s", spine, out)
	}
	t.Logf("kubectl prober status:\n%s", out)
	if out := run("who", "n11"); !strings.Contains(out, "agent n11 (node") || !strings.Contains(out, "probed by") || !strings.Contains(out, "n11 ->") {
		r.errorf(t, "kubectl prober who n11 lacks the node agent, its probers or its cells:\n%s", out)
	}
	t.Logf("kubectl prober status and who answered in %v", time.Since(start).Round(time.Second))
}

// kubectlTraceAndPage runs `kubectl prober trace` and page once the
// matrix is clean: while a spine drops, the agents spend their own trace
// budget on the lossy flows (trace then waits for it, as it says).
func (r *clusterRun) kubectlTraceAndPage(ctx context.Context, t *testing.T) {
	t.Helper()
	start := time.Now()
	out, err := r.c.KubectlPlugin(ctx, r.plugins, "prober", "trace", "n11", "n21", "--path", "node_to_node")
	if err != nil || !strings.Contains(out, "agent n11 to ") || !strings.Contains(out, "trace to ") {
		r.errorf(t, "kubectl prober trace n11 n21 printed no trace (%v):\n%s", err, out)
	}
	if lines := strings.SplitN(out, "\n", 4); len(lines) > 3 {
		out = strings.Join(lines[:3], "\n") + "\n..."
	}
	t.Logf("kubectl prober trace n11 n21:\n%s", out)
	r.kubectlPage(ctx, t)
	t.Logf("kubectl prober trace and page answered in %v", time.Since(start).Round(time.Second))
}

// kubectlPage starts `kubectl-prober page`, reads its URL and fetches the
// page and the diagnosis through it, then stops it.
func (r *clusterRun) kubectlPage(ctx context.Context, t *testing.T) {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd, err := r.c.Fabric.Command(pctx, lab.ControlPlaneName, filepath.Join(r.plugins, "kubectl-prober"), "page", "--kubeconfig", r.c.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testWriter{t}
	cmd.WaitDelay = 5 * time.Second
	if err := lab.Start(cmd); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		r.errorf(t, "kubectl prober page printed no URL: %v", err)
		return
	}
	i := strings.Index(line, "http://")
	if i < 0 {
		r.errorf(t, "kubectl prober page printed %q, no URL", line)
		return
	}
	url := strings.Fields(line[i:])[0]
	ns, err := r.c.Fabric.Namespace(lab.ControlPlaneName)
	if err != nil {
		t.Fatal(err)
	}
	client := lab.HTTPClient(ns, 10*time.Second)
	for path, want := range map[string]string{"": "<html", "api/v1/diagnosis": `"suspects"`} {
		resp, err := client.Get(url + path)
		if err != nil {
			r.errorf(t, "GET %s through kubectl prober page: %v", url+path, err)
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(strings.ToLower(string(body)), strings.ToLower(want)) {
			r.errorf(t, "GET %s through kubectl prober page: %d, no %s in %.300s", url+path, resp.StatusCode, want, body)
		}
	}
}
