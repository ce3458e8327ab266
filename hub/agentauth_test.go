package hub

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/auth"
	"github.com/netprober/prober/auth/authtest"
	"github.com/netprober/prober/config"
)

// TestPullsCarryTheAgentsKey: with discovery, the answers to an agent's
// long-poll carry its pull key, and the matrix presents that key when it
// pulls the agent; another agent's key differs. (Tokens are checked
// against a real API server in peers' TestKubeAgentAuth.)
func TestPullsCarryTheAgentsKey(t *testing.T) {
	var saw, sawURI atomic.Value
	agentSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		saw.Store(r.Header.Get("Authorization"))
		sawURI.Store(r.Method + " " + r.URL.RequestURI())
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
	// Signed with the key, never the key itself (TLS guards only the
	// long-poll that hands it out).
	got, _ := saw.Load().(string)
	method, uri, _ := strings.Cut(sawURI.Load().(string), " ")
	if strings.Contains(got, k11) {
		t.Errorf("the pull of n11 carried its key in the clear: %q", got)
	}
	if _, ok := api.VerifyPull(k11, got, method, uri, time.Now()); !ok {
		t.Errorf("the pull of n11 carried %q, not signed with its key", got)
	}
	if _, ok := api.VerifyPull(k21, got, method, uri, time.Now()); ok {
		t.Error("the pull of n11 verifies with n21's key")
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

// TestTokenChecksBesideARefetch: a token naming an unknown key makes the
// matrix fetch the API server's keys again; while that fetch hangs, other
// agents' new tokens verify with the keys held, and another unknown key
// is refused at once rather than queued. Tokens of other ServiceAccounts
// are refused and never cached, so they cannot flush the agents'.
func TestTokenChecksBesideARefetch(t *testing.T) {
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	known, unknown := authtest.Signer{Kid: "k1", EC: ek}, authtest.Signer{Kid: "k9", EC: other}
	keys, err := auth.ParseKeys(authtest.Issuer, authtest.JWKS(known))
	if err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int32
	release := make(chan struct{})
	hanging := make(chan struct{})
	a := newAgentAuth(func(ctx context.Context) (*auth.Keys, error) {
		if fetches.Add(1) > 1 {
			close(hanging)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return keys, nil
	}, "prober", "prober-agent", nil)
	now := time.Now()
	token := func(s authtest.Signer, sa, pod string) string {
		return s.Token(t, "ES256", authtest.Claims(now, api.AgentTokenAudience, "prober", sa, pod, "uid-"+pod, nil))
	}
	check := func(tok string) *authError {
		r := httptest.NewRequest("GET", api.AgentPlanPath+"x", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		_, err := a.token(t.Context(), r, now)
		return err
	}
	if err := check(token(known, "prober-agent", "p1")); err != nil {
		t.Fatalf("an agent's token: %v", err)
	}
	a.mu.Lock()
	a.fetched = a.fetched.Add(-refetchEvery) // a refetch is due
	a.mu.Unlock()
	refetched := make(chan *authError, 1)
	go func() { refetched <- check(token(unknown, "prober-agent", "p2")) }()
	select {
	case <-hanging:
	case <-time.After(10 * time.Second):
		t.Fatal("a token of an unknown key did not refetch the keys")
	}
	done := make(chan [2]*authError, 1)
	go func() {
		done <- [2]*authError{check(token(known, "prober-agent", "p3")), check(token(unknown, "prober-agent", "p4"))}
	}()
	select {
	case errs := <-done:
		if errs[0] != nil || errs[1] == nil || errs[1].status != http.StatusUnauthorized {
			t.Errorf("beside a hanging refetch: a new agent token %v (want accepted), another unknown key %v (want 401)", errs[0], errs[1])
		}
	case <-time.After(5 * time.Second):
		t.Error("a new agent token waited behind the refetch")
	}
	close(release)
	if err := <-refetched; err == nil || err.status != http.StatusUnauthorized {
		t.Errorf("the unknown key's token after the refetch: %v, want 401", err)
	}
	if n := fetches.Load(); n != 2 {
		t.Errorf("%d fetches of the keys, want 2: the first and one refetch", n)
	}
	for i := range 100 {
		if err := check(token(known, "someone-else", fmt.Sprint("f", i))); err == nil || err.status != http.StatusForbidden {
			t.Fatalf("a token of another ServiceAccount: %v, want 403", err)
		}
	}
	a.mu.Lock()
	cached := len(a.verified)
	a.mu.Unlock()
	if cached != 2 {
		t.Errorf("%d tokens cached, want the 2 agents' only", cached)
	}
}
