package peers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/netprober/prober/config"
)

// Config says what to discover.
type Config struct {
	// Namespace holds the agent Pods of both DaemonSets.
	Namespace string
	// NodeAgentSelector and PodAgentSelector are label selectors for the
	// Pods of the node (hostNetwork) and pod DaemonSets.
	NodeAgentSelector string
	PodAgentSelector  string
	// RackLabel is the Node label key naming its rack or ToR; empty for
	// none.
	RackLabel string
	// AgentPort is where node and pod peers are probed: the agents' port.
	AgentPort uint16
	// APIServerLB is the external API server address kubelets use, if
	// any; it becomes the lb peer "apiserver-lb".
	APIServerLB netip.AddrPort
	// APIServerHTTP2 has http2_ping reach the kubernetes Service and
	// apiserver-lb over TLS, verified with the agent's API server CA and
	// the name kubernetes.default.svc; without it their HTTP/2 mode is
	// none. The matrix sets it: each node agent then holds one connection
	// to the API server through them, as its node's kubelet does (seed
	// 001).
	APIServerHTTP2 bool
	// Settle is how long a change waits for more before a snapshot is
	// built, so 100 Nodes joining give one snapshot, not 100. Default 1s.
	Settle time.Duration
	// DNSNamespace and DNSService name the cluster DNS's Service, whose
	// VIP and endpoints every agent asks DNSQuery (dns.go); empty: none.
	DNSNamespace, DNSService, DNSQuery string
}

// MatrixConfig is the matrix's discovery from its kubernetes block: the
// agents, every LB they probe, the API server's VIPs pinged over TLS by
// node agents, and a 500 ms settle, so a pod that terminates leaves
// every plan within 2 s (half a second to coalesce, the rest to rebuild
// and answer the agents' polls).
func MatrixConfig(k *config.Kubernetes) Config {
	c := Config{
		Namespace:         k.Namespace,
		NodeAgentSelector: k.NodeAgentSelector,
		PodAgentSelector:  k.PodAgentSelector,
		RackLabel:         k.RackLabel,
		AgentPort:         uint16(k.AgentPort),
		APIServerLB:       k.APIServerLBAddr(),
		APIServerHTTP2:    true,
		Settle:            500 * time.Millisecond,
	}
	if ns, name, ok := k.DNSService(); ok {
		c.DNSNamespace, c.DNSService, c.DNSQuery = ns, name, k.DNS.Query
	}
	return c
}

// DefaultSettle is Config.Settle's default.
const DefaultSettle = time.Second

// APIServerLBName is the name of the configured external API server peer.
const APIServerLBName = "apiserver-lb"

// Discovery watches the cluster and emits peer snapshots.
type Discovery struct {
	client  kubernetes.Interface
	cfg     Config
	log     *slog.Logger
	changed chan struct{}
	warned  map[string]string // Service key -> bad http2 annotation already logged
}

// New checks cfg; nothing talks to the API server before Run.
func New(client kubernetes.Interface, cfg Config, logger *slog.Logger) (*Discovery, error) {
	var errs []error
	for _, s := range []struct{ field, sel string }{
		{"nodeAgentSelector", cfg.NodeAgentSelector}, {"podAgentSelector", cfg.PodAgentSelector},
	} {
		if s.sel == "" {
			errs = append(errs, fmt.Errorf("kubernetes.%s: required", s.field))
		} else if _, err := labels.Parse(s.sel); err != nil {
			errs = append(errs, fmt.Errorf("kubernetes.%s: %q is not a label selector: %w", s.field, s.sel, err))
		}
	}
	if cfg.Namespace == "" {
		errs = append(errs, errors.New("kubernetes.namespace: required"))
	}
	if cfg.AgentPort == 0 {
		errs = append(errs, errors.New("kubernetes.agentPort: required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle
	}
	return &Discovery{client: client, cfg: cfg, log: logger, changed: make(chan struct{}, 1), warned: map[string]string{}}, nil
}

// listers are the caches a snapshot is built from.
type listers struct {
	nodes    listersv1.NodeLister
	nodePods listersv1.PodLister // the node DaemonSet's pods
	podPods  listersv1.PodLister // the pod DaemonSet's pods
	services listersv1.ServiceLister
	// slices holds the probed Services' EndpointSlices (sliceWatch); nil
	// before they are watched.
	slices    discoverylisters.EndpointSliceLister
	rackLabel string
	port      uint16
	lb        netip.AddrPort
	dns       dnsService
	apiHTTP2  HTTP2 // the kubernetes Service's and apiserver-lb's
	// badHTTP2 is told of an opted-in Service's unusable http2
	// annotation (key namespace/name); nil: nobody is.
	badHTTP2 func(key, value string)
}

// Run starts the informers, waits for their caches, then calls emit with
// the first snapshot and again after every change that alters it, from
// this goroutine, until ctx is cancelled. It returns ctx.Err() if ctx ends
// before the caches sync, and nil on cancel afterwards.
func (d *Discovery) Run(ctx context.Context, emit func([]Peer)) error {
	ctx, cancel := context.WithCancel(ctx)
	tr := transform(d.cfg.RackLabel)
	opts := []informers.SharedInformerOption{informers.WithTransform(tr)}
	cluster := informers.NewSharedInformerFactoryWithOptions(d.client, 0, opts...)
	// Shutdown waits for the informers' goroutines, which end when ctx is
	// cancelled: the deferred cancel runs first.
	defer cluster.Shutdown()
	podFactory := func(selector string) informers.SharedInformerFactory {
		return informers.NewSharedInformerFactoryWithOptions(d.client, 0, append(opts,
			informers.WithNamespace(d.cfg.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))...)
	}
	nodeAgents := podFactory(d.cfg.NodeAgentSelector)
	defer nodeAgents.Shutdown()
	podAgents := podFactory(d.cfg.PodAgentSelector)
	defer podAgents.Shutdown()
	sw := &sliceWatch{client: d.client, transform: tr, handler: d.handler(), signal: d.signal}
	defer sw.stop()
	defer cancel()

	nodes := cluster.Core().V1().Nodes()
	nodePods := nodeAgents.Core().V1().Pods()
	podPods := podAgents.Core().V1().Pods()
	watched := []cache.SharedIndexInformer{nodes.Informer(), nodePods.Informer(), podPods.Informer()}
	l := listers{
		nodes: nodes.Lister(), nodePods: nodePods.Lister(), podPods: podPods.Lister(),
		rackLabel: d.cfg.RackLabel, port: d.cfg.AgentPort, lb: d.cfg.APIServerLB,
		dns:      dnsService{namespace: d.cfg.DNSNamespace, name: d.cfg.DNSService, query: d.cfg.DNSQuery},
		apiHTTP2: HTTP2{Mode: HTTP2None}, badHTTP2: d.warnHTTP2,
	}
	if d.cfg.APIServerHTTP2 {
		l.apiHTTP2 = HTTP2{Mode: HTTP2TLS, APIServer: true, ServerName: APIServerName}
	}
	services := cluster.Core().V1().Services()
	watched = append(watched, services.Informer())
	l.services = services.Lister()
	for _, inf := range watched {
		if _, err := inf.AddEventHandler(d.handler()); err != nil {
			return fmt.Errorf("peers: add event handler: %w", err)
		}
	}
	for _, f := range []informers.SharedInformerFactory{cluster, nodeAgents, podAgents} {
		f.Start(ctx.Done())
	}
	start := time.Now()
	for _, f := range []informers.SharedInformerFactory{cluster, nodeAgents, podAgents} {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("peers: %v cache not synced: %w", typ, ctx.Err())
			}
		}
	}
	// The probed Services are known now: watch their EndpointSlices, so
	// that the first snapshot has the backends.
	if err := sw.follow(ctx, serviceNames(l.probedServices())); err != nil {
		return err
	}
	if err := sw.waitSynced(ctx); err != nil {
		return err
	}
	d.log.Info("discovery synced", "duration_seconds", time.Since(start).Seconds())
	select { // the adds of the initial lists are in the first snapshot
	case <-d.changed:
	default:
	}
	build := func() []Peer {
		// Follow the set of probed Services first: a Service opted in
		// gets its backends once the replacement informer has synced,
		// which signals another snapshot.
		if err := sw.follow(ctx, serviceNames(l.probedServices())); err != nil {
			d.log.Warn("endpointslices", "err", err)
		}
		l.slices = sw.lister()
		return l.snapshot()
	}
	last := build()
	d.log.Info("peers", "count", len(last))
	emit(last)
	timer := time.NewTimer(0)
	<-timer.C
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.changed:
		}
		timer.Reset(d.cfg.Settle)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		select { // changes during the settle time are in this snapshot
		case <-d.changed:
		default:
		}
		snap := build()
		if equalSnapshots(snap, last) {
			continue
		}
		d.log.Debug("peers changed", "count", len(snap), "before", len(last))
		last = snap
		emit(snap)
	}
}

// warnHTTP2 logs an opted-in Service's unusable http2 annotation once per
// value, not at every snapshot.
func (d *Discovery) warnHTTP2(key, value string) {
	if d.warned[key] == value {
		return
	}
	d.warned[key] = value
	d.log.Warn("service not pinged over http2: annotation not one of h2c, tls, none",
		"service", key, "annotation", HTTP2Annotation, "value", value)
}

// handler only signals; the work happens in Run's loop, coalesced. A
// resync or a no-op update with the same ResourceVersion signals nothing.
func (d *Discovery) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { d.signal() },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(metav1.Object)
			n, ok2 := newObj.(metav1.Object)
			if ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion() {
				return
			}
			d.signal()
		},
		DeleteFunc: func(any) { d.signal() }, // DeletedFinalStateUnknown too: the snapshot reads the cache
	}
}

func (d *Discovery) signal() {
	select {
	case d.changed <- struct{}{}:
	default: // a change is already pending
	}
}

// snapshot builds the sorted peer list from the caches. Cached objects are
// shared: read, never modified.
func (l *listers) snapshot() []Peer {
	everything := labels.Everything()
	nodes, _ := l.nodes.List(everything)
	byName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	agents := map[string]*corev1.Pod{} // node name -> its node agent's pod
	nodePods, _ := l.nodePods.List(everything)
	for _, p := range nodePods {
		// Two serving (a rollout's overlap): the first by name, so that
		// equal caches give equal snapshots.
		if q, ok := agents[p.Spec.NodeName]; podServing(p) && (!ok || p.Name < q.Name) {
			agents[p.Spec.NodeName] = p
		}
	}
	podPods, _ := l.podPods.List(everything)
	out := make([]Peer, 0, len(nodes)+len(podPods)+2)
	for _, n := range nodes {
		if p, ok := nodePeer(n, l.rackLabel, l.port); ok {
			if a := agents[n.Name]; a != nil {
				p.Agent, p.AgentPod, p.AgentPodUID = true, a.Name, string(a.UID)
			}
			out = append(out, p)
		}
	}
	for _, pod := range podPods {
		if p, ok := podPeer(pod, byName[pod.Spec.NodeName], l.rackLabel, l.port); ok {
			out = append(out, p)
		}
	}
	// Backends: the node and pod peers by address (a node's InternalIP,
	// an agent pod's IP), named as agents name their targets.
	byAddr := make(map[netip.Addr]string, len(out))
	for _, p := range out {
		for _, a := range []netip.Addr{p.Addr, p.Addr6} {
			if _, dup := byAddr[a]; a.IsValid() && !dup {
				byAddr[a] = p.Name
			}
		}
	}
	// The cluster DNS's endpoints are peers before any Service's
	// backends are read: they are its VIP's.
	dnsVIP, dnsEndpoints := l.dns.peers(l.services, l.slices, byName, byAddr, l.rackLabel)
	for _, p := range dnsEndpoints {
		out = append(out, p)
		for _, a := range []netip.Addr{p.Addr, p.Addr6} {
			if a.IsValid() {
				byAddr[a] = p.Name
			}
		}
	}
	if dnsVIP.Name != "" {
		dnsVIP.Backends = backends(l.slices, l.dns.namespace, l.dns.name, byAddr)
		out = append(out, dnsVIP)
	}
	var apiBackends []string
	services, _ := l.services.List(everything)
	for _, s := range services {
		if l.dns.is(s) {
			continue // above
		}
		if isAPIServerService(s) {
			if p, ok := apiServerPeer(s, l.apiHTTP2); ok {
				apiBackends = backends(l.slices, s.Namespace, s.Name, byAddr)
				p.Backends = apiBackends
				out = append(out, p)
			}
			continue
		}
		ps, bad := servicePeers(s)
		if bad != "" && l.badHTTP2 != nil {
			l.badHTTP2(s.Namespace+"/"+s.Name, bad)
		}
		if len(ps) == 0 {
			continue
		}
		bs := backends(l.slices, s.Namespace, s.Name, byAddr)
		for _, p := range ps {
			p.Backends = bs
			out = append(out, p)
		}
	}
	if l.lb.IsValid() {
		// The external address kubelets use fronts the same API servers
		// that the kubernetes Service's endpoints are (each API server
		// publishes its own address there).
		out = append(out, Peer{Name: APIServerLBName, Class: ClassLB, Addr: l.lb.Addr(), Port: l.lb.Port(),
			Backends: apiBackends, HTTP2: l.apiHTTP2})
	}
	sortPeers(out)
	return out
}

// probedServices are the keys (namespace/name) of the Services that give
// lb peers: the kubernetes Service and the opted-in ones. Their
// EndpointSlices are the only ones watched.
func (l *listers) probedServices() []string {
	services, _ := l.services.List(labels.Everything())
	var out []string
	for _, s := range services {
		ok := false
		if l.dns.is(s) {
			ok = true
		} else if isAPIServerService(s) {
			_, ok = apiServerPeer(s, HTTP2{})
		} else {
			ps, _ := servicePeers(s)
			ok = len(ps) > 0
		}
		if ok {
			out = append(out, s.Namespace+"/"+s.Name)
		}
	}
	slices.Sort(out)
	return out
}

func isAPIServerService(s *corev1.Service) bool {
	return s.Namespace == metav1.NamespaceDefault && s.Name == "kubernetes"
}
