package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netprober/prober/api"
)

// TestFollowAuthenticates: the agent presents its token on every
// long-poll, learns the pull key from the answers, and then serves its
// observations to that key alone; before the first answer, to no one.
func TestFollowAuthenticates(t *testing.T) {
	a, base := loopbackAgent(t, "name: a1\nclass: node\nlisten: 127.0.0.1:0\nprobing: {protocols: [http2_ping], interval: 100ms, timeout: 500ms}\n")
	a.pull.required.Store(true) // as with discovery: kubernetes
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var sawToken atomic.Value
	matrix := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawToken.Store(r.Header.Get("Authorization"))
		w.Header().Set(api.PullKeyHeader, "key-1")
		if r.URL.Query().Get("version") == "v1" {
			time.Sleep(100 * time.Millisecond)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		json.NewEncoder(w).Encode(api.AgentPlan{Version: "v1", Name: "a1", Class: api.ClassNode})
	}))
	t.Cleanup(matrix.Close)
	status := func(key string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+api.ObservationsPath, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := status("key-1"); s != http.StatusUnauthorized {
		t.Errorf("before the matrix answered: %d, want 401", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Follow(ctx, PlanSource{URL: matrix.URL, Wait: time.Second, TokenFile: tokenFile}) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(5 * time.Second)
	for status("key-1") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the observations never answered the matrix's key")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, _ := sawToken.Load().(string); got != "Bearer tok-1" {
		t.Errorf("the long-poll's Authorization: %q, want the token file's", got)
	}
	for _, key := range []string{"", "key-2", "key-1x"} {
		if s := status(key); s != http.StatusUnauthorized {
			t.Errorf("key %q: %d, want 401", key, s)
		}
	}
	if s := status("key-1"); s != http.StatusOK {
		t.Errorf("the matrix's key: %d", s)
	}
	// /metrics and /healthz stay open: Prometheus and the kubelet.
	for _, p := range []string{"/metrics", "/healthz"} {
		resp, err := http.Get(base + p)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: %v %v", p, err, resp)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
}
