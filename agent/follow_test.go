package agent

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/tlsfiles"
	"github.com/netprober/prober/tlsfiles/tlsfilestest"
)

// planServer is a matrix that serves the plans pushed to it, long-polled
// as the hub does; down makes it answer 503.
type planServer struct {
	mu      sync.Mutex
	plan    api.AgentPlan
	changed chan struct{}
	down    bool
	polls   []string // the versions agents sent
}

func (s *planServer) set(p api.AgentPlan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plan = p
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *planServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, api.AgentPlanPath) {
		http.NotFound(w, r)
		return
	}
	have := r.URL.Query().Get("version")
	for {
		s.mu.Lock()
		s.polls = append(s.polls, have)
		p, changed, down := s.plan, s.changed, s.down
		s.mu.Unlock()
		if down {
			http.Error(w, "away", http.StatusServiceUnavailable)
			return
		}
		if p.Version != have {
			json.NewEncoder(w).Encode(p)
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-time.After(2 * time.Second):
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
}

// observed is what the agent at base reports: its targets' names and its
// own labels.
func observed(t *testing.T, base string) (targets []string, labels map[string]string) {
	t.Helper()
	var obs api.Observations
	resp, err := http.Get(base + api.ObservationsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&obs); err != nil {
		t.Fatal(err)
	}
	for _, tg := range obs.Targets {
		targets = append(targets, tg.Name)
	}
	return targets, obs.Agent.Labels
}

// TestFollow: the agent probes what the plan says, changes with it at
// once, reports the plan's labels under its own, and keeps its last plan
// while the matrix is away. Targets are loopback listeners.
func TestFollow(t *testing.T) {
	a, base := loopbackAgent(t, "name: a1\nclass: node\nlisten: 127.0.0.1:0\nlabels: {zone: mine}\nprobing: {protocols: [http2_ping], interval: 100ms, timeout: 500ms}\n")
	port := uint16(openPort(t))
	target := func(name string) api.Peer {
		return api.Peer{Name: name, Class: api.ClassNode, Address: "127.0.0.1", Port: port}
	}
	srv := &planServer{changed: make(chan struct{}),
		plan: api.AgentPlan{Version: "v1", Name: "a1", Class: api.ClassNode, Group: "tor1",
			Labels: map[string]string{"rack": "tor1", "zone": "theirs"}, Targets: []api.Peer{target("t1")}}}
	matrix := httptest.NewServer(srv)
	t.Cleanup(matrix.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- a.Follow(ctx, PlanSource{URL: matrix.URL, Labels: map[string]string{"zone": "mine"}, Wait: 2 * time.Second})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Follow: %v", err)
		}
	})
	var labels map[string]string
	targets := func() []string {
		var out []string
		out, labels = observed(t, base)
		return out
	}
	await := func(what string, want []string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			got := targets()
			if slices.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: targets %v, want %v", what, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	await("first plan", []string{"t1"})
	if labels["rack"] != "tor1" || labels["zone"] != "mine" {
		t.Errorf("agent labels %v: want the plan's rack under the configured zone", labels)
	}
	start := time.Now()
	srv.set(api.AgentPlan{Version: "v2", Name: "a1", Class: api.ClassNode, Group: "tor1",
		Labels: map[string]string{"rack": "tor1"}, Targets: []api.Peer{target("t2"), target("t3")}})
	await("changed plan", []string{"t2", "t3"})
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the change took %v to apply, want the held poll to bring it at once", took)
	}
	srv.mu.Lock()
	srv.down = true
	srv.mu.Unlock()
	time.Sleep(2500 * time.Millisecond) // the held poll ends, the next fails
	await("matrix away", []string{"t2", "t3"})
	srv.mu.Lock()
	sawV2 := slices.Contains(srv.polls, "v2")
	srv.mu.Unlock()
	if !sawV2 {
		t.Error("the agent never sent the version it holds")
	}
}

func TestTargetsFromPlan(t *testing.T) {
	t.Parallel()
	// RFC 5737 addresses: nothing is dialled.
	ps := []api.Peer{
		{Name: "n1", Class: api.ClassNode, Address: "192.0.2.1", Port: 9808},
		{Name: "vip", Class: api.ClassLB, Address: "192.0.2.9", Port: 443, Backends: []string{"n1"},
			HTTP2: &api.PeerHTTP2{Mode: api.HTTP2TLS, ServerName: "kubernetes.default.svc", APIServer: true}},
		{Name: "svc", Class: api.ClassLB, Address: "192.0.2.10", Port: 80, HTTP2: &api.PeerHTTP2{Mode: api.HTTP2TLS, InsecureSkipVerify: true}},
		{Name: "v6", Class: api.ClassNode, Address: "2001:db8::1", Port: 9808},
		{Name: "dual", Class: api.ClassNode, Address: "192.0.2.2", Addresses: []string{"192.0.2.2", "2001:db8::2"}, Port: 9808},
		{Name: "twov4", Class: api.ClassNode, Address: "192.0.2.7", Addresses: []string{"192.0.2.8"}, Port: 9808},
		{Name: "", Class: api.ClassNode, Address: "192.0.2.3", Port: 9808},
		{Name: "odd", Class: "switch", Address: "192.0.2.4", Port: 9808},
		{Name: "noport", Class: api.ClassNode, Address: "192.0.2.5"},
		{Name: "h3", Class: api.ClassLB, Address: "192.0.2.6", Port: 443, HTTP2: &api.PeerHTTP2{Mode: "h3"}},
	}
	ts, bad := TargetsFromPlan(ps, "/ca.pem")
	var names []string
	for _, tg := range ts {
		names = append(names, tg.Name)
	}
	// A dual-stack peer is one target per family.
	if !slices.Equal(names, []string{"n1", "vip", "svc", "v6", "dual", "dual"}) || len(bad) != 5 {
		t.Fatalf("kept %v, refused %v", names, bad)
	}
	if ts[4].Addr.String() != "192.0.2.2" || ts[5].Addr.String() != "2001:db8::2" {
		t.Errorf("dual-stack peer: %v and %v, want one target per family", ts[4].Addr, ts[5].Addr)
	}
	if h := ts[1].HTTP2; h.Mode != api.HTTP2TLS || h.CAFile != "/ca.pem" || h.ServerName != "kubernetes.default.svc" {
		t.Errorf("the API server VIP: %+v, want tls verified with the agent's CA", h)
	}
	if h := ts[2].HTTP2; h.CAFile != "" || !h.InsecureSkipVerify {
		t.Errorf("an opted-in Service: %+v", h)
	}
	if ts[0].HTTP2 != (HTTP2{}) || !slices.Equal(ts[1].Backends, []string{"n1"}) {
		t.Errorf("n1 %+v, vip %+v", ts[0], ts[1])
	}
}

// TestFollowTLS: with the matrix's CA the agent follows it over TLS,
// verified for the Service's name though it dials an address; with
// another CA it sends the matrix nothing, not even its token's request.
func TestFollowTLS(t *testing.T) {
	dir := t.TempDir()
	files := tlsfilestest.Write(t, dir, "prober-matrix.prober.svc")
	certs, err := tlsfiles.NewServer(files.Cert, files.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(srv *planServer) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: srv, TLSConfig: certs.Config()}
		go hs.ServeTLS(ln, "", "")
		t.Cleanup(func() { hs.Close() })
		return "https://" + ln.Addr().String()
	}
	follow := func(a *Agent, src PlanSource) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Follow(ctx, src) }()
		t.Cleanup(func() {
			cancel()
			<-done
		})
	}
	targetsOf := func(base string) []string {
		out, _ := observed(t, base)
		return out
	}
	plan := api.AgentPlan{Version: "v1", Name: "a1", Class: api.ClassNode, Group: "tor1",
		Targets: []api.Peer{{Name: "t1", Class: api.ClassNode, Address: "127.0.0.1", Port: uint16(openPort(t))}}}

	roots, err := tlsfiles.NewRoots(files.CA, nil)
	if err != nil {
		t.Fatal(err)
	}
	good := &planServer{changed: make(chan struct{}), plan: plan}
	a, base := loopbackAgent(t, "name: a1\nclass: node\nlisten: 127.0.0.1:0\nprobing: {protocols: [tcp_syn], interval: 100ms, timeout: 500ms}\n")
	follow(a, PlanSource{URL: serve(good), TLS: roots.Config("prober-matrix.prober.svc"), Wait: 2 * time.Second})

	other, err := tlsfiles.NewRoots(tlsfilestest.Write(t, t.TempDir(), "prober-matrix.prober.svc").CA, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := &planServer{changed: make(chan struct{}), plan: plan}
	b, baseB := loopbackAgent(t, "name: a1\nclass: node\nlisten: 127.0.0.1:0\nprobing: {protocols: [tcp_syn], interval: 100ms, timeout: 500ms}\n")
	follow(b, PlanSource{URL: serve(bad), TLS: other.Config("prober-matrix.prober.svc"), Wait: 2 * time.Second})

	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(targetsOf(base), []string{"t1"}) {
		if time.Now().After(deadline) {
			t.Fatalf("over TLS with the matrix's CA: targets %v after 5s, want [t1]", targetsOf(base))
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // the other agent's first tries have failed by now
	bad.mu.Lock()
	polls := len(bad.polls)
	bad.mu.Unlock()
	if got := targetsOf(baseB); len(got) != 0 || polls != 0 {
		t.Errorf("with another CA: targets %v, %d requests reached the matrix; want none", got, polls)
	}
}
