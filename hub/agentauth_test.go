package hub

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
)

// TestPullsCarryTheAgentsKey: with discovery, the answers to an agent's
// long-poll carry its pull key, and the matrix presents that key when it
// pulls the agent; another agent's key differs. (Tokens are checked
// against a real API server in peers' TestKubeAgentAuth.)
func TestPullsCarryTheAgentsKey(t *testing.T) {
	var saw atomic.Value
	agentSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		saw.Store(r.Header.Get("Authorization"))
		writeObs(w, report("n11", "r1", map[string]string{"n21": "r2"}, 100, 0))
	}))
	t.Cleanup(agentSrv.Close)
	cfg := &config.Matrix{Listen: "127.0.0.1:0", Discovery: config.DiscoveryKubernetes,
		Kubernetes: &config.Kubernetes{AgentAuth: config.AgentAuthNone}, Interval: config.Duration(time.Second)}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Kubernetes.AgentAuth = config.AgentAuthToken
	if _, err := New(cfg, slog.New(slog.DiscardHandler), Options{}); err == nil || !strings.Contains(err.Error(), "signing keys") {
		t.Errorf("agentAuth token without the API server's keys: %v, want refused", err)
	}
	cfg.Kubernetes.AgentAuth = config.AgentAuthNone
	h, err := New(cfg, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	go h.srv.Serve(h.ln)
	t.Cleanup(func() { h.srv.Close() })
	h.SetPeers([]api.Peer{
		{Name: "n11", Class: api.ClassNode, Address: "192.0.2.11", Pod: "prober-node-a"},
		{Name: "n21", Class: api.ClassNode, Address: "192.0.2.21", Pod: "prober-node-b"},
	}, map[string]string{"n11": agentSrv.URL, "n21": "http://192.0.2.21:9808"})
	key := func(agent string) string {
		resp, err := http.Get("http://" + h.Addr().String() + api.AgentPlanPath + agent + "?wait=1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s's plan: %s", agent, resp.Status)
		}
		return resp.Header.Get(api.PullKeyHeader)
	}
	k11, k21 := key("n11"), key("n21")
	if len(k11) < 32 || k11 == k21 || key("n11") != k11 {
		t.Errorf("pull keys n11 %q n21 %q: want long, distinct, stable", k11, k21)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.Round(ctx)
	if got, _ := saw.Load().(string); got != "Bearer "+k11 {
		t.Errorf("the pull of n11 carried %q, want its key", got)
	}
}

// Replicas given one secret hand out the same pull keys, so an agent
// answers either; without one each process draws its own.
func TestPullKeySecretShared(t *testing.T) {
	secret := []byte(strings.Repeat("s", 32))
	a, b := newAgentAuth(nil, "prober", "prober-agent", secret), newAgentAuth(nil, "prober", "prober-agent", secret)
	if a.pullKey("n11") != b.pullKey("n11") || a.pullKey("n11") == a.pullKey("n12") {
		t.Error("one secret: keys differ between replicas, or agents share one")
	}
	c, d := newAgentAuth(nil, "prober", "prober-agent", nil), newAgentAuth(nil, "prober", "prober-agent", nil)
	if c.pullKey("n11") == d.pullKey("n11") {
		t.Error("drawn secrets gave equal keys")
	}
}
