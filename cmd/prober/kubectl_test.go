package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/cmd/internal/cli"
	"github.com/netprober/prober/peers"
)

// TestKubectlUsage: the plugin's bad invocations each get a message and
// exit 2 before anything is dialled; a missing kubeconfig exits 1 saying so.
func TestKubectlUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{nil, cli.ExitUsage, "usage: kubectl prober"},
		{[]string{"stats"}, cli.ExitUsage, `unknown command "stats"`},
		{[]string{"who"}, cli.ExitUsage, "want 1 arguments (NODE)"},
		{[]string{"trace", "n11"}, cli.ExitUsage, "want 2 arguments (SRC DST)"},
		{[]string{"trace", "n11", "n21", "--path", "node_to_spine"}, cli.ExitUsage, `--path "node_to_spine"`},
		{[]string{"trace", "n11", "n21", "--family", "ipv5"}, cli.ExitUsage, `--family "ipv5"`},
		{[]string{"page", "--address", "0.0.0.0"}, cli.ExitUsage, "want a loopback address"},
		{[]string{"status", "--request-timeout", "0s"}, cli.ExitUsage, "must be positive"},
		{[]string{"status", "--kubeconfig", missing}, cli.ExitRuntime, missing},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"kubectl"}, c.args...), &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.says) {
			t.Errorf("kubectl prober %q: exit %d, %q; want %d saying %q", c.args, code, stderr.String(), c.code, c.says)
		}
	}
}

// TestPrintStatus: the listed suspects in words, each with its effect,
// evidence, ties and example flows; disputes and the unlisted counted.
func TestPrintStatus(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	d := api.Diagnosis{Time: at, Suspects: []api.Suspect{
		{Kind: api.KindDevice, Name: "spine2", Score: 0.9, EstimatedLoss: 0.048, Since: at.Add(-time.Minute),
			Evidence: api.Evidence{Stage: "estimator", Detail: "drops 4.8 % of what it forwards", LostProbes: 96, SentProbes: 2000, LossyFlows: 12, CleanFlows: 30, PValue: 1e-9,
				Ties: []api.Ref{{Kind: api.KindLink, Name: "tor1->spine2"}},
				Examples: []api.FlowRef{{Source: "n11", Target: "n21", Path: api.PathNodeToNode, Sent: 60, Lost: 4,
					SourceAddress: "192.0.2.11", SourcePort: 33000, TargetAddress: "192.0.2.21", TargetPort: 9810}}}},
		{Kind: api.KindLatency, Name: "spine1", Score: 0.4, AddedDelay: 0.02, Family: api.FamilyIPv6, Since: at},
		{Kind: api.KindHost, Name: "n31", Score: 0.05},
	}, Disputed: []api.Dispute{{Kind: api.KindLink, Name: "tor3->spine1", Confirming: 1, Contradicting: 5}}}
	var b bytes.Buffer
	printStatus(&b, d)
	out := b.String()
	for _, want := range []string{
		"round of 2026-11-29T12:00:00Z",
		"1. device spine2: score 0.90, drops 4.80 % of what it forwards, since 2026-11-29T11:59:00Z",
		"96 of 2000 probes lost, 12 lossy and 30 clean flows",
		"tied with link tor1->spine2",
		"e.g. n11 -> n21 node_to_node: lost 4 of 60 (tcp 192.0.2.11:33000 -> 192.0.2.21:9810)",
		"2. latency spine1 (ipv6 only): score 0.40, adds 20.0 ms",
		"disputed, not a suspect: link tor3->spine1: 1 agents blame it, 5 see it clean",
		"1 more below score 0.1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "host n31") {
		t.Errorf("an unlisted suspect printed as listed:\n%s", out)
	}
	b.Reset()
	printStatus(&b, api.Diagnosis{Time: at, Suspects: []api.Suspect{}})
	if !strings.Contains(b.String(), "nothing is dropping or delaying packets") {
		t.Errorf("a clean diagnosis: %q", b.String())
	}
}

// TestTraceRetry: trace waits as the matrix says while the agent's trace
// budget refills, a bounded number of times within the request's bound,
// and gives up at once on anything else.
func TestTraceRetry(t *testing.T) {
	busy := &peers.AnswerError{Status: http.StatusTooManyRequests, RetryAfter: 16 * time.Second}
	for _, c := range []struct {
		name string
		err  error
		try  int
		left time.Duration
		wait time.Duration
	}{
		{"busy, time left", busy, 1, 2 * time.Minute, 16 * time.Second},
		{"busy, last try", busy, maxTraceTries, 2 * time.Minute, 0},
		{"busy, no time left", busy, 1, 20 * time.Second, 0},
		{"busy, no Retry-After", &peers.AnswerError{Status: http.StatusTooManyRequests}, 1, 2 * time.Minute, 0},
		{"busy for an hour", &peers.AnswerError{Status: http.StatusTooManyRequests, RetryAfter: time.Hour}, 1, 2 * time.Hour, 0},
		{"not found", &peers.AnswerError{Status: http.StatusNotFound, RetryAfter: time.Second}, 1, 2 * time.Minute, 0},
		{"a dial error", errors.New("connection refused"), 1, 2 * time.Minute, 0},
	} {
		wait, ok := traceRetry(fmt.Errorf("wrapped: %w", c.err), c.try, c.left)
		if wait != c.wait || ok != (c.wait > 0) {
			t.Errorf("%s: wait %v %v, want %v", c.name, wait, ok, c.wait)
		}
	}
}
