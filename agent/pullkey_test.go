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

// TestPullSigned: a request signed with the key is served once; the same
// request again (read off the wire), one signed for another path, with
// another key or outside the window is refused.
func TestPullSigned(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	k := &pullKey{now: func() time.Time { return clock }}
	k.required.Store(true)
	k.set("key-1")
	served := 0
	h := k.guard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	do := func(auth, method, uri string) int {
		req := httptest.NewRequest(method, uri, nil)
		req.Header.Set("Authorization", auth)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	obs := api.ObservationsPath
	signed := api.SignPull("key-1", http.MethodGet, obs, clock)
	if c := do(signed, http.MethodGet, obs); c != http.StatusOK {
		t.Fatalf("signed pull: %d", c)
	}
	if c := do(signed, http.MethodGet, obs); c != http.StatusUnauthorized {
		t.Errorf("the same signed pull again: %d, want 401", c)
	}
	trace := api.TracePath + "?target=n21&family=ipv4"
	for name, tc := range map[string]struct{ auth, method, uri string }{
		"another path":  {api.SignPull("key-1", http.MethodGet, obs, clock.Add(1)), http.MethodPost, trace},
		"another query": {api.SignPull("key-1", http.MethodPost, trace, clock.Add(2)), http.MethodPost, api.TracePath + "?target=n22&family=ipv4"},
		"another key":   {api.SignPull("key-2", http.MethodGet, obs, clock.Add(3)), http.MethodGet, obs},
		"stale":         {api.SignPull("key-1", http.MethodGet, obs, clock.Add(-api.PullWindow-time.Second)), http.MethodGet, obs},
	} {
		if c := do(tc.auth, tc.method, tc.uri); c != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, c)
		}
	}
	if c := do(api.SignPull("key-1", http.MethodPost, trace, clock.Add(4)), http.MethodPost, trace); c != http.StatusOK {
		t.Errorf("a signed trace: %d", c)
	}
	if served != 2 {
		t.Errorf("served %d requests, want the 2 signed ones", served)
	}
	// The replay check is bounded: old entries expire, and a flood of
	// signed requests (only the key's holder can make them) is capped.
	for i := range maxSeen + 10 {
		do(api.SignPull("key-1", http.MethodGet, obs, clock.Add(time.Duration(10+i))), http.MethodGet, obs)
	}
	if len(k.seen) > maxSeen {
		t.Errorf("%d requests remembered, want at most %d", len(k.seen), maxSeen)
	}
	clock = clock.Add(3 * api.PullWindow)
	if c := do(api.SignPull("key-1", http.MethodGet, obs, clock), http.MethodGet, obs); c != http.StatusOK || len(k.seen) != 1 {
		t.Errorf("after the window: %d with %d remembered, want 200 and the expired ones dropped", c, len(k.seen))
	}
}
