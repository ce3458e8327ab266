package peers_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/netprober/prober/peers"
)

// TestLogThrough: what client-go logs through klog (an info line of its
// leader election, an error of a watch) reaches the process's slog
// handler, in its format, and klog's own debug levels stay below it.
func TestLogThrough(t *testing.T) {
	var b bytes.Buffer
	peers.LogThrough(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelInfo})))
	t.Cleanup(klog.ClearLogger)
	klog.InfoS("attempting to acquire leader lease", "lease", "prober/prober-matrix-node-conditions")
	klog.ErrorS(nil, "failed to watch", "resource", "nodes")
	klog.V(4).InfoS("a debug line")
	klog.Flush()
	out := b.String()
	for _, want := range []string{`level=INFO msg="attempting to acquire leader lease" lease=prober/prober-matrix-node-conditions`, `level=ERROR msg="failed to watch" resource=nodes`} {
		if !strings.Contains(out, want) {
			t.Errorf("the handler got %q, want a line with %s", out, want)
		}
	}
	if strings.Contains(out, "a debug line") {
		t.Errorf("klog's V(4) reached an info-level handler: %q", out)
	}
}
