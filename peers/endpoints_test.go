package peers

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// sliceSelectors are the label selectors of discovery's EndpointSlice
// lists, in order, repeats folded: one per informer it started.
func sliceSelectors(t *testing.T, c *fake.Clientset) []string {
	t.Helper()
	var out []string
	for _, a := range c.Actions() {
		if a.GetResource().Resource != "endpointslices" {
			continue
		}
		var sel string
		switch a := a.(type) {
		case k8stesting.ListAction:
			sel = a.GetListRestrictions().Labels.String()
		case k8stesting.WatchAction:
			sel = a.GetWatchRestrictions().Labels.String()
		default:
			continue // the test's own writes
		}
		if sel == "" {
			t.Errorf("an unselected %s of every EndpointSlice in the cluster", a.GetVerb())
		}
		if a.GetVerb() == "list" {
			out = append(out, sel)
		}
	}
	return slices.Compact(out)
}

func lbPeer(ps []Peer, name string) (Peer, bool) {
	for _, p := range ps {
		if p.Class == ClassLB && p.Name == name {
			return p, true
		}
	}
	return Peer{}, false
}

// TestRunFollowsEndpoints drives Run through the fake clientset: lb peers
// carry their Services' ready endpoints that are peers; the EndpointSlice
// informer selects only the probed Services by name and is replaced when
// a Service is opted in or out; endpoints of other Services change
// nothing.
func TestRunFollowsEndpoints(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset(
		node("n1", "192.0.2.1", true),
		node("n2", "192.0.2.2", true),
		agentPod("prober-pod-a", "pod", "n1", "198.51.100.11", true),
		service("default", "kubernetes", clusterIP("198.51.100.1")),
		service("web", "app", clusterIP("198.51.100.40")),
		slice("default", "kubernetes", "kubernetes", ep("192.0.2.1", "y", "y", "")),
		slice("web", "app", "app-1", ep("198.51.100.11", "y", "y", ""), ep("192.0.2.2", "y", "y", ""), ep("203.0.113.9", "y", "y", "")),
	)
	d, err := New(client, Config{Namespace: testNS, NodeAgentSelector: nodeSel, PodAgentSelector: podSel,
		AgentPort: testPort, Settle: testSettleD, APIServerHTTP2: true},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	snaps := make(chan []Peer, 16)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, func(ps []Peer) { snaps <- ps }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var last []Peer
	// awaitAfter applies write and waits for a snapshot satisfying ok.
	// The fake clientset's watches do not resume from a list's
	// resourceVersion, so a write landing between a replaced
	// informer's list and its watch is lost; write is repeated every
	// 2 s, which a real API server would never need.
	awaitAfter := func(step string, write func() error, ok func([]Peer) bool) {
		t.Helper()
		apply := func() {
			if write == nil {
				return
			}
			if err := write(); err != nil {
				t.Fatal(err)
			}
		}
		apply()
		deadline := time.After(20 * time.Second)
		again := time.NewTicker(2 * time.Second)
		defer again.Stop()
		for {
			select {
			case last = <-snaps:
				if ok(last) {
					return
				}
			case <-again.C:
				apply()
			case <-deadline:
				t.Fatalf("%s: not within 20s; last snapshot %v", step, last)
			}
		}
	}
	await := func(step string, ok func([]Peer) bool) { t.Helper(); awaitAfter(step, nil, ok) }
	backendsAre := func(name string, want ...string) func([]Peer) bool {
		return func(ps []Peer) bool {
			p, ok := lbPeer(ps, name)
			return ok && slices.Equal(p.Backends, want)
		}
	}
	const only, both = "kubernetes.io/service-name in (kubernetes)", "kubernetes.io/service-name in (app,kubernetes)"

	await("initial", backendsAre("default/kubernetes", "n1"))
	if p, _ := lbPeer(last, "default/kubernetes"); p.HTTP2 != (HTTP2{Mode: HTTP2TLS, APIServer: true, ServerName: APIServerName}) {
		t.Errorf("the kubernetes Service's http2: %+v", p.HTTP2)
	}
	if _, ok := lbPeer(last, "web/app"); ok {
		t.Error("a Service that is not opted in is a peer")
	}
	if got := sliceSelectors(t, client); !slices.Equal(got, []string{only}) {
		t.Errorf("initial EndpointSlice lists selected %q, want %q", got, only)
	}

	// Opted in: a peer at once, its backends once the informer
	// selecting it has synced.
	services := client.CoreV1().Services("web")
	if _, err := services.Update(ctx, service("web", "app", clusterIP("198.51.100.40"), annotated("h2c"),
		func(s *corev1.Service) { s.ResourceVersion = "2" }), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	await("opted in", backendsAre("web/app", "n2", "prober-pod-a"))
	if got := sliceSelectors(t, client); !slices.Equal(got, []string{only, both}) {
		t.Errorf("EndpointSlice lists selected %q, want %q", got, []string{only, both})
	}

	// A backend turning NotReady leaves the list; the peer stays.
	eslices := client.DiscoveryV1().EndpointSlices("web")
	// Each write gets a new resourceVersion, as a real API server gives
	// it: the discovery ignores an update that keeps its object's.
	rv := 10
	awaitAfter("backend not ready", func() error {
		rv++
		s := slice("web", "app", "app-1", ep("198.51.100.11", "n", "n", ""), ep("192.0.2.2", "y", "y", ""))
		s.ResourceVersion = strconv.Itoa(rv)
		_, err := eslices.Update(ctx, s, metav1.UpdateOptions{})
		return err
	}, backendsAre("web/app", "n2"))

	// A Service of the same name in another namespace matches the
	// selector, but its endpoints are not web/app's: no new snapshot.
	if _, err := client.DiscoveryV1().EndpointSlices("other").Create(ctx,
		slice("other", "app", "app-x", ep("192.0.2.1", "y", "y", "")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ps := <-snaps:
		p, _ := lbPeer(ps, "web/app")
		t.Errorf("a snapshot after another namespace's endpoints: web/app backends %v", p.Backends)
	case <-time.After(20 * testSettleD):
	}

	// Opted out: the peer leaves and the informer selects the
	// kubernetes Service alone again.
	if _, err := services.Update(ctx, service("web", "app", clusterIP("198.51.100.40"),
		func(s *corev1.Service) { s.ResourceVersion = "3" }), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	await("opted out", func(ps []Peer) bool { _, ok := lbPeer(ps, "web/app"); return !ok })
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(sliceSelectors(t, client), []string{only, both, only}) {
		if time.Now().After(deadline) {
			t.Fatalf("EndpointSlice lists selected %q, want %q", sliceSelectors(t, client), []string{only, both, only})
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p, _ := lbPeer(last, "default/kubernetes"); !slices.Equal(p.Backends, []string{"n1"}) {
		t.Errorf("the kubernetes Service's backends after the informer was replaced: %v", p.Backends)
	}
}
