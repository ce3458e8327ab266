package peers_test

// The matrix as prober's only API client (issue 14), against the real
// kube-apiserver: its plan at 1,000 Nodes with no rack or zone label, and
// what prober costs the API server with 1,000 agents, before and after.
//
// The agents exist only as API objects at 198.18.0.0/15 addresses. The
// matrix pulls every agent discovery finds each interval; its transport
// refuses every dial but loopback's, so nothing leaves the machine. The
// simulated agents talk HTTP to the matrix on 127.0.0.1 only.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/hub"
	"github.com/netprober/prober/peers"
	"github.com/netprober/prober/peers/peerstest"
	"github.com/netprober/prober/probe/probetest"
)

// loadNodes is the cluster TestKubeMatrixPlan and TestKubeAPILoad share:
// that many Nodes, each with a node agent and a pod agent.
const loadNodes = 1000

var (
	loadOnce   sync.Once
	loadErr    error
	loadAgents []string
)

// loadCluster creates, once, loadNodes Ready Nodes apiload-NNNN with no
// label, each with a Ready node agent pod (host network, at the Node's
// address) and a pod agent pod, and returns the agents' names: the node
// agents' (their Nodes' names), then the pod agents'.
func loadCluster(t *testing.T, s *peerstest.Server) []string {
	t.Helper()
	deployed(t, s)
	loadOnce.Do(func() {
		admin, err := s.AdminClient()
		if err != nil {
			loadErr = err
			return
		}
		start := time.Now()
		loadErr = parallel(loadNodes, 32, func(i int) error {
			node := fmt.Sprintf("apiload-%04d", i)
			if err := createNodeLabelled(t.Context(), admin, node, addr4(40000+i), nil); err != nil {
				return err
			}
			if err := createAgentPod(t.Context(), admin, "prober-node-"+node, "node", node, addr4(40000+i)); err != nil {
				return err
			}
			return createAgentPod(t.Context(), admin, "prober-pod-"+node, "pod", node, addr4(50000+i))
		})
		for i := range loadNodes {
			loadAgents = append(loadAgents, fmt.Sprintf("apiload-%04d", i))
		}
		for i := range loadNodes {
			loadAgents = append(loadAgents, fmt.Sprintf("prober-pod-apiload-%04d", i))
		}
		t.Logf("created %d unlabelled Nodes, %d node agent and %d pod agent pods in %s",
			loadNodes, loadNodes, loadNodes, time.Since(start).Round(time.Second))
	})
	if loadErr != nil {
		t.Fatalf("create the cluster: %v", loadErr)
	}
	return loadAgents
}

// runningMatrix is `prober matrix` with discovery: kubernetes, wired as
// cmd/prober's newMatrixDiscovery and runMatrixWithDiscovery wire it (a
// main package is not importable; cmd/prober may not import k8s.io/*), as
// the prober-matrix ServiceAccount through impersonation, so deploy/'s
// RBAC is what it gets.
type runningMatrix struct {
	URL     string
	cfg     *config.Matrix
	refused atomic.Int64 // pulls refused before any dial
	stop    func()
}

// startMatrix starts the matrix; agentAuth is its kubernetes.agentAuth.
func startMatrix(t *testing.T, s *peerstest.Server, name, agentAuth string) *runningMatrix {
	t.Helper()
	kc, err := s.Kubeconfig(name, "system:serviceaccount:prober:prober-matrix")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseMatrix(name+".yaml", fmt.Appendf(nil,
		"listen: 127.0.0.1:0\ndiscovery: kubernetes\nkubernetes: {kubeconfig: %q, agentAuth: %s}\nlog: text\n", kc, agentAuth))
	if err != nil {
		t.Fatal(err)
	}
	// Every pull fails (refused): the hub warns once per agent, which is
	// thousands of lines here.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	m := &runningMatrix{cfg: cfg}
	k := cfg.Kubernetes
	client, err := peers.NewClient(k.Kubeconfig, "prober-test/"+name)
	if err != nil {
		t.Fatal(err)
	}
	d, err := peers.New(client, peers.MatrixConfig(k), log)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hub.New(cfg, log, hub.Options{Transport: m.loopbackOnly(), SigningKeys: d.SigningKeys})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return h.Run(gctx) })
	g.Go(func() error {
		err := d.Run(gctx, func(ps []peers.Peer) {
			p, agents := peers.Plan(ps)
			h.SetPeers(p, agents)
		})
		if gctx.Err() != nil {
			return nil
		}
		return err
	})
	var once sync.Once
	m.stop = func() {
		once.Do(func() {
			cancel()
			if err := g.Wait(); err != nil {
				t.Errorf("matrix %s: %v", name, err)
			}
		})
	}
	t.Cleanup(m.stop)
	m.URL = "http://" + h.Addr().String()
	return m
}

// loopbackOnly is the hub's pull transport: it refuses, before any
// packet, every address but loopback's.
func (m *runningMatrix) loopbackOnly() http.RoundTripper {
	var d net.Dialer
	return &http.Transport{Proxy: nil, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if ap, err := netip.ParseAddrPort(addr); err != nil || !ap.Addr().IsLoopback() {
			m.refused.Add(1)
			return nil, fmt.Errorf("test: %s is not loopback: not dialled", addr)
		}
		return d.DialContext(ctx, network, addr)
	}}
}

func (m *runningMatrix) plan(t *testing.T) api.PlanView {
	t.Helper()
	resp, err := http.Get(m.URL + api.PlanPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v api.PlanView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("GET %s: %v", api.PlanPath, err)
	}
	return v
}

// awaitPlan polls the matrix's /api/v1/plan until it has every one of
// agents.
func (m *runningMatrix) awaitPlan(t *testing.T, agents []string, timeout time.Duration) api.PlanView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v := m.plan(t)
		have := map[string]bool{}
		for _, a := range v.Agents {
			have[a.Name] = true
		}
		missing := 0
		for _, a := range agents {
			if !have[a] {
				missing++
			}
		}
		if missing == 0 {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s the plan has %d agents, %d of the %d wanted missing", timeout, len(v.Agents), missing, len(agents))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestKubeMatrixPlan: the matrix, given 1,000 Nodes with no rack or zone
// label and their 2,000 agents in a real API server, serves a complete
// plan at /api/v1/plan, with plan.Build's guarantees: every agent within
// the target budget and probed by at least plan.inGroup agents of its
// class (8: with no label the 1,000 of a class are one group).
func TestKubeMatrixPlan(t *testing.T) {
	s := apiServer(t)
	agents := loadCluster(t, s)
	start := time.Now()
	m := startMatrix(t, s, "matrix-plan", config.AgentAuthToken)
	v := m.awaitPlan(t, agents, 2*time.Minute)
	took := time.Since(start)

	byName := map[string]api.AgentPlan{}
	probers := map[string]map[string]bool{} // target -> agents of its class probing it
	for _, a := range v.Agents {
		byName[a.Name] = a
		for _, tg := range a.Targets {
			if tg.Class != a.Class {
				continue
			}
			if probers[tg.Name] == nil {
				probers[tg.Name] = map[string]bool{}
			}
			probers[tg.Name][a.Name] = true
		}
	}
	most, fewest, never := 0, -1, 0
	for _, name := range agents {
		a := byName[name]
		if len(a.Targets) == 0 || len(a.Targets) > m.cfg.Plan.MaxTargets || a.Version == "" {
			t.Errorf("agent %s: %d targets (budget %d), version %q", name, len(a.Targets), m.cfg.Plan.MaxTargets, a.Version)
		}
		most = max(most, len(a.Targets))
		n := len(probers[name])
		if n == 0 {
			never++
		}
		if fewest < 0 || n < fewest {
			fewest = n
		}
	}
	t.Logf("%d Nodes, no labels: complete plan %s after the matrix started; %d agents in it (the test's %d), rotation rounds %d; "+
		"never probed %d, fewest probers of its class %d, most targets %d",
		loadNodes, took.Round(time.Millisecond), len(v.Agents), len(agents), v.RotationRounds, never, fewest, most)
	if never > 0 || fewest < m.cfg.Plan.InGroup {
		t.Errorf("%d agents never probed, fewest probers %d; want 0 and at least plan.inGroup %d", never, fewest, m.cfg.Plan.InGroup)
	}
	// Other tests' agents, in racks of a few, owe the big group a prober
	// from another rack each, which takes a rotation (plan/doc.go); alone,
	// the one group covers itself every round.
	if len(v.Agents) == len(agents) && v.RotationRounds != 1 {
		t.Errorf("rotation rounds %d, want 1 (one group covers itself every round)", v.RotationRounds)
	}
}

// pollers are simulated agents following their plans as agent.Follow
// does: one long-poll each to the matrix, asked again with the version
// they hold, each from a loopback address of its own as each agent has
// its own pod or node address (the matrix's guard holds one source to
// its share). They record every address they dial.
type pollers struct {
	plans, notModified, failures atomic.Int64
	first                        sync.WaitGroup
	wg                           sync.WaitGroup
	cancel                       context.CancelFunc
	mu                           sync.Mutex
	dialled                      map[string]int
}

func startPollers(base string, names []string, first int) *pollers {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pollers{cancel: cancel, dialled: map[string]int{}}
	p.first.Add(len(names))
	for i, name := range names {
		from := probetest.DialerFrom(probetest.Loopback(50, first+i+1))
		client := &http.Client{Timeout: 45 * time.Second, Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				p.mu.Lock()
				p.dialled[addr]++
				p.mu.Unlock()
				return from(ctx, "tcp4", addr)
			},
		}}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			u := base + api.AgentPlanPath + url.PathEscape(name) + "?wait=30&version="
			version, got := "", false
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u+url.QueryEscape(version), nil)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						p.failures.Add(1)
						time.Sleep(time.Second)
					}
					continue
				}
				var ap api.AgentPlan
				switch {
				case resp.StatusCode == http.StatusNotModified:
					p.notModified.Add(1)
				case resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&ap) == nil && ap.Version != "":
					p.plans.Add(1)
					version = ap.Version
					if !got {
						got = true
						p.first.Done()
					}
				default:
					p.failures.Add(1)
					time.Sleep(time.Second)
				}
				resp.Body.Close()
			}
		}()
	}
	return p
}

// awaitFirst waits until every poller holds a plan.
func (p *pollers) awaitFirst(t *testing.T, timeout time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { p.first.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatalf("not every simulated agent got its plan within %s (%d plans, %d failures)", timeout, p.plans.Load(), p.failures.Load())
	}
}

func (p *pollers) stop() {
	p.cancel()
	p.wg.Wait()
}

// oldAgents are simulated agents of before issue 14, each opening the
// watches its own discovery opened: Nodes, Services, the two agent
// DaemonSets' Pods in prober, and the probed Services' EndpointSlices
// (here the kubernetes Service's). They are raw watches from the current
// resource version, not informers: n informer caches of the cluster would
// take gigabytes in the test, and the API server's cost of a watcher is
// the same. They are the admin's, whom API Priority and Fairness exempts,
// so that thousands opening at once are not queued: what is measured is
// their standing cost. Every watch is drained and its events counted.
type oldAgents struct {
	nodeEvents, errs atomic.Int64
	cancel           context.CancelFunc
	wg               sync.WaitGroup
}

func startOldAgents(t *testing.T, s *peerstest.Server, n int) *oldAgents {
	t.Helper()
	c, err := s.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &oldAgents{cancel: cancel}
	t.Cleanup(o.stop)
	core, ns := c.CoreV1(), config.DefaultNamespace
	eps := c.DiscoveryV1().EndpointSlices("")
	sliceSel := peers.ServiceNameLabel + " in (kubernetes)"
	// The resource versions to watch from: from "" the API server would
	// first send every object to every watcher, which an informer's watch
	// (after its list) does not get either.
	var rvs [4]string
	for i, list := range []func(metav1.ListOptions) (metav1.ListInterface, error){
		func(o metav1.ListOptions) (metav1.ListInterface, error) { return core.Nodes().List(ctx, o) },
		func(o metav1.ListOptions) (metav1.ListInterface, error) { return core.Services("").List(ctx, o) },
		func(o metav1.ListOptions) (metav1.ListInterface, error) { return core.Pods(ns).List(ctx, o) },
		func(o metav1.ListOptions) (metav1.ListInterface, error) { return eps.List(ctx, o) },
	} {
		l, err := list(metav1.ListOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		rvs[i] = l.GetResourceVersion()
	}
	from := func(selector, rv string) metav1.ListOptions {
		return metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv}
	}
	opens := []func() (watch.Interface, error){
		func() (watch.Interface, error) { return core.Nodes().Watch(ctx, from("", rvs[0])) },
		func() (watch.Interface, error) { return core.Services("").Watch(ctx, from("", rvs[1])) },
		func() (watch.Interface, error) {
			return core.Pods(ns).Watch(ctx, from(config.DefaultNodeAgentSelector, rvs[2]))
		},
		func() (watch.Interface, error) {
			return core.Pods(ns).Watch(ctx, from(config.DefaultPodAgentSelector, rvs[2]))
		},
		func() (watch.Interface, error) { return eps.Watch(ctx, from(sliceSel, rvs[3])) },
	}
	err = parallel(n*len(opens), 32, func(i int) error {
		w, err := opens[i%len(opens)]()
		if err != nil {
			return err
		}
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			defer w.Stop()
			for ev := range w.ResultChan() {
				switch {
				case ev.Type == watch.Error:
					o.errs.Add(1)
				case i%len(opens) == 0:
					o.nodeEvents.Add(1)
				}
			}
		}()
		return nil
	})
	if err != nil {
		t.Fatalf("open the old agents' watches: %v", err)
	}
	return o
}

func (o *oldAgents) stop() {
	o.cancel()
	o.wg.Wait()
}

// awaitWatches polls the API server's open watches on the resources
// discovery reads until ok holds and the count stayed the same for a
// second.
func awaitWatches(t *testing.T, s *peerstest.Server, what string, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last, same := -1.0, 0
	for {
		v := watches(t, s)
		if v == last {
			same++
		} else {
			last, same = v, 0
		}
		if ok(v) && same >= 4 {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %g watches open", what, v)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// touchNodes changes a label of the first n test Nodes, one update each.
func touchNodes(t *testing.T, s *peerstest.Server, n int, value string) {
	t.Helper()
	c, err := s.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{"apiload.prober.test/touch":%q}}}`, value)
	for i := range n {
		if _, err := c.CoreV1().Nodes().Patch(t.Context(), fmt.Sprintf("apiload-%04d", i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// nodeWatch is what the API server has sent its Node watchers: events,
// and their bytes.
type nodeWatch struct{ events, bytes float64 }

func nodeWatchSent(t *testing.T, s *peerstest.Server) nodeWatch {
	t.Helper()
	return nodeWatch{apiMetric(t, s, "apiserver_watch_events_total", `resource="nodes"`),
		apiMetric(t, s, "apiserver_watch_events_sizes_sum", `resource="nodes"`)}
}

// per is the events and bytes sent since w, per one of n updates.
func (w nodeWatch) per(t *testing.T, s *peerstest.Server, n int) nodeWatch {
	t.Helper()
	now := nodeWatchSent(t, s)
	return nodeWatch{(now.events - w.events) / float64(n), (now.bytes - w.bytes) / float64(n)}
}

func (w nodeWatch) minus(o nodeWatch) nodeWatch {
	return nodeWatch{w.events - o.events, w.bytes - o.bytes}
}

// discoveryRequests are the API requests an agent of before issue 14 made
// (LIST and WATCH on nodes, pods, services and endpointslices, GET on the
// first three: see getResources).
func discoveryRequests(t *testing.T, s *peerstest.Server) float64 {
	return requests(t, s, "LIST", discoveryResources) + requests(t, s, "WATCH", discoveryResources) + requests(t, s, "GET", getResources)
}

// TestKubeAPILoad measures what prober costs the API server with 1,000
// agents, on the real kube-apiserver (docs/performance.md keeps the
// table). After issue 14 the matrix alone watches: its 5 watches, the
// same with 100 and with 1,000 agents long-polling it, one watch event
// per Node update, and no API request from an agent. Before, every
// agent ran its own discovery: 5 watches each, and every Node update was
// sent to each of them.
func TestKubeAPILoad(t *testing.T) {
	s := apiServer(t)
	agents := loadCluster(t, s)
	const touched = 20
	base := awaitWatches(t, s, "baseline", func(float64) bool { return true })
	// The API server's own watchers of Nodes, counted apart.
	sent := nodeWatchSent(t, s)
	touchNodes(t, s, touched, "none")
	time.Sleep(time.Second)
	own := sent.per(t, s, touched)

	// After: the matrix, and 100 then 1,000 agents on long-polls.
	// The simulated agents hold no tokens: this measures the API
	// server's load, and TestKubeAgentAuth the tokens.
	m := startMatrix(t, s, "matrix-load", config.AgentAuthNone)
	m.awaitPlan(t, agents, 2*time.Minute)
	reqs := discoveryRequests(t, s)
	few := startPollers(m.URL, agents[:100], 0)
	defer few.stop()
	few.awaitFirst(t, time.Minute)
	after100 := awaitWatches(t, s, "matrix + 100 agents", func(v float64) bool { return v > base }) - base
	start := time.Now()
	more := startPollers(m.URL, agents[100:1000], 100)
	defer more.stop()
	more.awaitFirst(t, time.Minute)
	firstPlans := time.Since(start)
	after1000 := awaitWatches(t, s, "matrix + 1,000 agents", func(v float64) bool { return v > base }) - base
	plans := few.plans.Load() + more.plans.Load()
	sent = nodeWatchSent(t, s)
	touchNodes(t, s, touched, "after")
	time.Sleep(2 * time.Second) // the matrix's settle time and more
	after := sent.per(t, s, touched).minus(own)
	newPlans := few.plans.Load() + more.plans.Load() - plans
	agentReqs := discoveryRequests(t, s) - reqs
	few.stop()
	more.stop()
	refused := m.refused.Load()
	for _, p := range []*pollers{few, more} {
		for addr := range p.dialled {
			if "http://"+addr != m.URL {
				t.Errorf("a simulated agent dialled %s; want only the matrix, %s", addr, m.URL)
			}
		}
		if f := p.failures.Load(); f > 0 {
			t.Errorf("%d failed long-polls", f)
		}
	}
	m.stop()

	// Before: 1,000 agents, each with the watches of its own discovery.
	base = awaitWatches(t, s, "matrix gone", func(v float64) bool { return v <= base })
	start = time.Now()
	old := startOldAgents(t, s, 1000)
	before := awaitWatches(t, s, "1,000 old agents", func(v float64) bool { return v >= base+1000*5 }) - base
	opened := time.Since(start)
	sent = nodeWatchSent(t, s)
	received := old.nodeEvents.Load()
	touchNodes(t, s, touched, "before")
	deadline := time.Now().Add(time.Minute)
	for old.nodeEvents.Load()-received < touched*1000 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // the API server's counter, after the last send
	beforeSent := sent.per(t, s, touched).minus(own)
	receivedPer := float64(old.nodeEvents.Load()-received) / touched
	if e := old.errs.Load(); e > 0 { // before stop, which ends every watch with one
		t.Errorf("%d error events on the old agents' watches", e)
	}
	old.stop()

	t.Logf("the API server's own Node watchers (%g events, %.0f bytes per update) are left out below; the matrix's pulls refused before dialling: %d; "+
		"900 agents got their first plan in %s; 1,000 old agents' 5,000 watches opened in %s",
		own.events, own.bytes, refused, firstPlans.Round(time.Millisecond), opened.Round(time.Millisecond))
	t.Logf("| | watches open on the API server | watch events (bytes) sent per Node update | API requests from agents |")
	t.Logf("|---|---|---|---|")
	t.Logf("| before: 1,000 agents, each with its own discovery | %g | %.0f (%.0f B); the agents received %g | 5 LIST + 5 WATCH each at start |",
		before, beforeSent.events, beforeSent.bytes, receivedPer)
	t.Logf("| after: the matrix + 100 agents on long-polls | %g | | |", after100)
	t.Logf("| after: the matrix + 1,000 agents on long-polls | %g | %.0f (%.0f B) | %g; plans sent on those updates: %d |",
		after1000, after.events, after.bytes, agentReqs, newPlans)
	if after100 != after1000 || after1000 > 5 {
		t.Errorf("watches with the matrix: %g with 100 agents, %g with 1,000; want the matrix's 5, whatever the agents", after100, after1000)
	}
	if before < 1000*4 {
		t.Errorf("before: %g watches, want at least 4 per agent", before)
	}
	// The API server counts bookmarks as watch events too, about one per
	// watch a minute: hence a margin on its counts; the old agents' own
	// count is exact.
	if receivedPer != 1000 || beforeSent.events < 990 || after.events < 0.5 || after.events > 1.5 {
		t.Errorf("watch events per Node update: %g sent before (received %g), %g after; want every agent's before, the matrix's alone after",
			beforeSent.events, receivedPer, after.events)
	}
	if agentReqs != 0 {
		t.Errorf("%g LIST, WATCH or GET requests while 1,000 agents followed the matrix; want none", agentReqs)
	}
	if newPlans != 0 {
		t.Errorf("%d plans sent for label changes that change no plan", newPlans)
	}
}
