package peers_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netprober/prober/config"
	"github.com/netprober/prober/peers"
	"github.com/netprober/prober/peers/peerstest"
)

// watcher runs discovery as the prober-matrix ServiceAccount (through
// impersonation, so deploy/'s RBAC is what it gets) and keeps the latest
// snapshot.
type watcher struct {
	mu    sync.Mutex
	last  []peers.Peer
	count int
	next  chan struct{}
}

func startDiscovery(t *testing.T, s *peerstest.Server, name string, settle time.Duration) *watcher {
	t.Helper()
	return startDiscoveryWith(t, s, name, settle, nil)
}

// startDiscoveryWith is startDiscovery with edit applied to its config.
func startDiscoveryWith(t *testing.T, s *peerstest.Server, name string, settle time.Duration, edit func(*peers.Config)) *watcher {
	t.Helper()
	kc, err := s.Kubeconfig(name, "system:serviceaccount:prober:prober-matrix")
	if err != nil {
		t.Fatal(err)
	}
	client, err := peers.NewClient(kc, "prober-test/"+name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := peers.Config{
		Namespace: config.DefaultNamespace, NodeAgentSelector: config.DefaultNodeAgentSelector,
		PodAgentSelector: config.DefaultPodAgentSelector, RackLabel: "example.com/rack", AgentPort: config.DefaultPort,
		APIServerLB: netip.MustParseAddrPort("203.0.113.10:6443"), Settle: settle,
	}
	if edit != nil {
		edit(&cfg)
	}
	d, err := peers.New(client, cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	w := &watcher{next: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- d.Run(ctx, func(ps []peers.Peer) {
			w.mu.Lock()
			w.last, w.count = ps, w.count+1
			w.mu.Unlock()
			select {
			case w.next <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("discovery Run: %v", err)
		}
	})
	return w
}

// await waits up to timeout for a snapshot that satisfies ok.
func (w *watcher) await(t *testing.T, what string, timeout time.Duration, ok func([]peers.Peer) bool) []peers.Peer {
	t.Helper()
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		last := w.last
		w.mu.Unlock()
		if last != nil && ok(last) {
			return last
		}
		select {
		case <-w.next:
		case <-deadline:
			t.Fatalf("%s: not within %s; last snapshot has %d peers: %v", what, timeout, len(last), summary(last))
		}
	}
}

func summary(ps []peers.Peer) string {
	if len(ps) > 12 {
		return fmt.Sprint(names(ps[:6]), " ... ", names(ps[len(ps)-6:]))
	}
	return fmt.Sprint(names(ps))
}

func names(ps []peers.Peer) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Class + ":" + p.Name
	}
	return out
}

func count(ps []peers.Peer, class, prefix string) int {
	n := 0
	for _, p := range ps {
		if p.Class == class && strings.HasPrefix(p.Name, prefix) {
			n++
		}
	}
	return n
}

func has(ps []peers.Peer, class, name string) bool {
	return slices.ContainsFunc(ps, func(p peers.Peer) bool { return p.Class == class && p.Name == name })
}

// addr4 numbers test addresses inside 198.18.0.0/15 (never dialled).
func addr4(i int) string {
	return netip.AddrFrom4([4]byte{198, 18 + byte(i>>16&1), byte(i >> 8), byte(i)}).String()
}

// createNode creates a Ready Node with an InternalIP, a zone and a rack:
// a bare API server has no kubelet, so the test writes the status itself.
func createNode(ctx context.Context, c kubernetes.Interface, name, ip string) error {
	return createNodeLabelled(ctx, c, name, ip, map[string]string{peers.ZoneLabel: "z" + strconv.Itoa(len(name)%3), "example.com/rack": "r1"})
}

// createNodeLabelled is createNode with the given labels (nil: none).
func createNodeLabelled(ctx context.Context, c kubernetes.Interface, name, ip string, labels map[string]string) error {
	n, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	n.Status = corev1.NodeStatus{
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
	}
	_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

// createAgentPod creates a Running, Ready agent pod of component node or
// pod on nodeName with ip; a node agent is on the host network, as
// deploy/'s prober-node DaemonSet is.
func createAgentPod(ctx context.Context, c kubernetes.Interface, name, component, nodeName, ip string) error {
	grace := int64(30)
	p, err := c.CoreV1().Pods(config.DefaultNamespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "prober", "app.kubernetes.io/component": component}},
		Spec: corev1.PodSpec{NodeName: nodeName, TerminationGracePeriodSeconds: &grace, HostNetwork: component == "node",
			// As deploy/ runs them: the agents' ServiceAccount, whose
			// tokens bound to this pod the matrix accepts, and no API token.
			ServiceAccountName: config.DefaultAgentServiceAccount, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "prober", Image: "ghcr.io/netprober/prober:test"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	_, err = c.CoreV1().Pods(config.DefaultNamespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// parallel runs f(i) for i in [0, n) on workers goroutines, stopping at
// the first error.
func parallel(n, workers int, f func(i int) error) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// requests sums the API server's own apiserver_request_total for the given
// verb over the given resources.
func requests(t *testing.T, s *peerstest.Server, verb string, resources []string) float64 {
	t.Helper()
	body, err := s.Get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `verb="`+verb+`"`) {
			continue
		}
		if !slices.ContainsFunc(resources, func(r string) bool { return strings.Contains(line, `resource="`+r+`"`) }) {
			continue
		}
		if strings.Contains(line, `subresource="status"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// discoveryResources are the resources discovery lists and watches.
// Discovery GETs nothing; the API server's own endpoint reconciler GETs
// the kubernetes Service's EndpointSlice every 10 s, so GETs are counted
// on the others only.
var (
	discoveryResources = []string{"nodes", "pods", "services", "endpointslices"}
	getResources       = discoveryResources[:3]
)

// watches is the API server's count of open WATCH requests on the
// resources discovery reads.
func watches(t *testing.T, s *peerstest.Server) float64 {
	t.Helper()
	body, err := s.Get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "apiserver_longrunning_requests{") && strings.Contains(line, `verb="WATCH"`) &&
			slices.ContainsFunc(discoveryResources, func(r string) bool { return strings.Contains(line, `resource="`+r+`"`) }) {
			v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			sum += v
		}
	}
	return sum
}

// TestKubeDiscovery follows Nodes, agent Pods and Services the test
// creates, churn of 100 Nodes, and NotReady and terminating pods leaving at
// once; meanwhile discovery's load on the API server is its watches only.
func TestKubeDiscovery(t *testing.T) {
	s := apiServer(t)
	deployed(t, s)
	admin, err := s.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	core := admin.CoreV1()
	for i := range 3 {
		node := fmt.Sprintf("disc-%d", i)
		if err := createNode(ctx, admin, node, addr4(10+i)); err != nil {
			t.Fatal(err)
		}
		if err := createAgentPod(ctx, admin, "prober-node-"+node, "node", node, addr4(10+i)); err != nil {
			t.Fatal(err)
		}
		if err := createAgentPod(ctx, admin, "prober-pod-"+node, "pod", node, addr4(1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	lb := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{peers.ProbeAnnotation: "true"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443, Protocol: corev1.ProtocolTCP}}},
	}
	if lb, err = core.Services("default").Create(ctx, lb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
	if _, err = core.Services("default").UpdateStatus(ctx, lb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	w := startDiscovery(t, s, "discovery", 200*time.Millisecond)
	ps := w.await(t, "initial peers", 30*time.Second, func(ps []peers.Peer) bool {
		return count(ps, peers.ClassNode, "disc-") == 3 && count(ps, peers.ClassPod, "prober-pod-disc-") == 3 &&
			has(ps, peers.ClassLB, "default/kubernetes") && has(ps, peers.ClassLB, "default/web@203.0.113.7") && has(ps, peers.ClassLB, peers.APIServerLBName)
	})
	t.Logf("initial snapshot after %s: %v", time.Since(start).Round(time.Millisecond), summary(ps))
	for _, p := range ps {
		switch {
		case p.Class == peers.ClassNode && strings.HasPrefix(p.Name, "disc-"):
			if !p.Agent || p.Port != config.DefaultPort || p.Labels["rack"] != "r1" || p.Labels["zone"] == "" {
				t.Errorf("node peer %+v: want an agent, port, rack and zone", p)
			}
		case p.Name == "default/kubernetes":
			if p.Addr != netip.MustParseAddr("198.51.100.1") || p.Port != 443 {
				t.Errorf("API server peer %v, want 198.51.100.1:443", p)
			}
		}
	}

	// Churn: 100 Nodes join, then leave.
	if err := parallel(100, 16, func(i int) error { return createNode(ctx, admin, fmt.Sprintf("churn-%03d", i), addr4(2000+i)) }); err != nil {
		t.Fatal(err)
	}
	w.await(t, "100 nodes added", 30*time.Second, func(ps []peers.Peer) bool { return count(ps, peers.ClassNode, "churn-") == 100 })
	if err := parallel(100, 16, func(i int) error {
		return core.Nodes().Delete(ctx, fmt.Sprintf("churn-%03d", i), metav1.DeleteOptions{})
	}); err != nil {
		t.Fatal(err)
	}
	w.await(t, "100 nodes removed", 30*time.Second, func(ps []peers.Peer) bool {
		return count(ps, peers.ClassNode, "churn-") == 0 && count(ps, peers.ClassNode, "disc-") == 3
	})

	// A NotReady pod leaves; a terminating one (graceful delete of a pod
	// bound to a node: it stays, with a deletionTimestamp, until a kubelet
	// would confirm) leaves at once too.
	p, err := core.Pods("prober").Get(ctx, "prober-pod-disc-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	if _, err := core.Pods("prober").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.await(t, "NotReady pod gone", 10*time.Second, func(ps []peers.Peer) bool {
		return !has(ps, peers.ClassPod, "prober-pod-disc-0") && has(ps, peers.ClassPod, "prober-pod-disc-1")
	})
	if err := core.Pods("prober").Delete(ctx, "prober-pod-disc-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if p, err := core.Pods("prober").Get(ctx, "prober-pod-disc-1", metav1.GetOptions{}); err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("graceful delete: pod %v, err %v; want it terminating", p, err)
	}
	w.await(t, "terminating pod gone", 10*time.Second, func(ps []peers.Peer) bool {
		return !has(ps, peers.ClassPod, "prober-pod-disc-1") && has(ps, peers.ClassPod, "prober-pod-disc-2")
	})
	// A Node whose kubelet went silent (Ready Unknown, as in a
	// partition) stays, marked; one whose kubelet reports NotReady
	// leaves, and its agent flag with it.
	setReady := func(st corev1.ConditionStatus) {
		t.Helper()
		n, err := core.Nodes().Get(ctx, "disc-2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions[0].Status = st
		if _, err := core.Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setReady(corev1.ConditionUnknown)
	w.await(t, "silent node marked", 10*time.Second, func(ps []peers.Peer) bool {
		for _, p := range ps {
			if p.Class == peers.ClassNode && p.Name == "disc-2" {
				return p.Labels[peers.LabelReady] == "unknown"
			}
		}
		return false
	})
	setReady(corev1.ConditionFalse)
	w.await(t, "NotReady node gone", 10*time.Second, func(ps []peers.Peer) bool { return !has(ps, peers.ClassNode, "disc-2") })

	// Quiet: discovery running, the test creating nothing. Its load is
	// its open watches; no list, get or new watch reaches the server.
	time.Sleep(time.Second) // let the last status writes' echoes settle
	lists, gets, watchReqs := requests(t, s, "LIST", discoveryResources), requests(t, s, "GET", getResources), requests(t, s, "WATCH", discoveryResources)
	open := watches(t, s)
	w.mu.Lock()
	snaps := w.count
	w.mu.Unlock()
	time.Sleep(15 * time.Second)
	dl, dg, dw := requests(t, s, "LIST", discoveryResources)-lists, requests(t, s, "GET", getResources)-gets, requests(t, s, "WATCH", discoveryResources)-watchReqs
	t.Logf("quiet 15s: +%g LIST, +%g WATCH on nodes/pods/services/endpointslices, +%g GET on nodes/pods/services; %g watches open", dl, dw, dg, open)
	if dl != 0 || dg != 0 || dw != 0 {
		t.Errorf("discovery polled: +%g LIST, +%g GET, +%g WATCH in 15 quiet seconds; want 0", dl, dg, dw)
	}
	if open < 5 {
		t.Errorf("%g open watches on nodes/pods/services/endpointslices, want discovery's 5", open)
	}
	w.mu.Lock()
	if w.count != snaps {
		t.Errorf("%d snapshots emitted while nothing changed", w.count-snaps)
	}
	w.mu.Unlock()
}

// TestKubeDiscoveryScale puts 5,000 Nodes and 5,000 prober Pods in the API
// server and checks the peer set and what discovery costs in memory.
func TestKubeDiscoveryScale(t *testing.T) {
	if os.Getenv("PROBER_KUBE_SCALE") == "" && testing.Short() {
		t.Skip("skipped under -short")
	}
	s := apiServer(t)
	deployed(t, s)
	admin, err := s.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const n = 5000
	start := time.Now()
	if err := parallel(n, 32, func(i int) error {
		node := fmt.Sprintf("scale-%04d", i)
		if err := createNode(ctx, admin, node, addr4(10000+i)); err != nil {
			return err
		}
		return createAgentPod(ctx, admin, "prober-pod-"+node, "pod", node, addr4(20000+i))
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d nodes and %d pods in %s", n, n, time.Since(start).Round(time.Second))

	before := heapInuse()
	start = time.Now()
	w := startDiscovery(t, s, "scale", time.Second)
	ps := w.await(t, "5,000 nodes and pods", 3*time.Minute, func(ps []peers.Peer) bool {
		return count(ps, peers.ClassNode, "scale-") == n && count(ps, peers.ClassPod, "prober-pod-scale-") == n
	})
	synced := time.Since(start)
	after := heapInuse()
	for _, p := range ps {
		if p.Class == peers.ClassPod && strings.HasPrefix(p.Name, "prober-pod-scale-") {
			i, _ := strconv.Atoi(strings.TrimPrefix(p.Name, "prober-pod-scale-"))
			if p.Addr.String() != addr4(20000+i) || p.Labels["node"] != fmt.Sprintf("scale-%04d", i) {
				t.Fatalf("pod peer %+v: want address %s on node scale-%04d", p, addr4(20000+i), i)
			}
		}
	}
	rss := rssBytes()
	t.Logf("5,000 nodes + 5,000 pods: first full snapshot (%d peers) in %s; discovery heap %.1f MiB (caches and one snapshot); test process RSS %.1f MiB",
		len(ps), synced.Round(time.Millisecond), float64(after-before)/(1<<20), float64(rss)/(1<<20))
}

func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func rssBytes() uint64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
