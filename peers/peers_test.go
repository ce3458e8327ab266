package peers

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/netprober/prober/config"
)

// Addresses are RFC 5737: nothing here is dialled.

const (
	testNS      = "prober"
	nodeSel     = "app.kubernetes.io/name=prober,app.kubernetes.io/component=node"
	podSel      = "app.kubernetes.io/name=prober,app.kubernetes.io/component=pod"
	testRack    = "example.com/rack"
	testPort    = 9808
	testSettleD = 20 * time.Millisecond
)

func node(name, ip string, ready bool, mods ...func(*corev1.Node)) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1",
			Labels: map[string]string{ZoneLabel: "z1", testRack: "r1", "unrelated": "x"}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeHostName, Address: name},
				{Type: corev1.NodeInternalIP, Address: ip},
			},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: st},
			},
			Images: []corev1.ContainerImage{{Names: []string{"big/image:1"}, SizeBytes: 1 << 30}},
		},
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

func agentPod(name, component, nodeName, ip string, ready bool, mods ...func(*corev1.Pod)) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, ResourceVersion: "1",
			Labels: map[string]string{"app.kubernetes.io/name": "prober", "app.kubernetes.io/component": component}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "agent", Image: "prober"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func service(ns, name string, mods ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "1"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func loadBalancer(ips ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Annotations = map[string]string{ProbeAnnotation: "true", "other": "x"}
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "web", Port: 8443, Protocol: corev1.ProtocolTCP}}
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
	}
}

// clusterIP gives a Service its (IPv4) ClusterIP.
func clusterIP(ip string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = ip, []string{ip} }
}

// annotated opts a Service in, with an http2 annotation unless h2 is "".
func annotated(h2 string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Annotations = map[string]string{ProbeAnnotation: "true"}
		if h2 != "" {
			s.Annotations[HTTP2Annotation] = h2
		}
	}
}

// slice is an IPv4 EndpointSlice of the Service ns/svc.
func slice(ns, svc, name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "1",
			Labels: map[string]string{ServiceNameLabel: svc, "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr(int32(8443))}},
		Endpoints:   eps,
	}
}

// ep is an endpoint at ip; ready, serving and terminating are "y", "n" or
// "" (unset), in that order.
func ep(ip, ready, serving, terminating string) discoveryv1.Endpoint {
	b := func(v string) *bool {
		if v == "" {
			return nil
		}
		return ptr(v == "y")
	}
	return discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr("n1"),
		Conditions: discoveryv1.EndpointConditions{Ready: b(ready), Serving: b(serving), Terminating: b(terminating)}}
}

func ptr[T any](v T) *T { return &v }

func deleting[T metav1.Object](o T) {
	now := metav1.Now()
	o.SetDeletionTimestamp(&now)
}

func names(ps []Peer) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Class + ":" + p.Name
	}
	return out
}

// testListers fills informer indexers directly, as sample-controller's
// tests do: no API server, no watch.
func testListers(t *testing.T, objs ...runtime.Object) *listers {
	t.Helper()
	f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	nodes := f.Core().V1().Nodes()
	services := f.Core().V1().Services()
	eslices := f.Discovery().V1().EndpointSlices()
	nodePods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	podPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	tr := transform(testRack)
	for _, o := range objs {
		slim, err := tr(o)
		if err != nil {
			t.Fatal(err)
		}
		var idx cache.Indexer
		switch o := o.(type) {
		case *corev1.Node:
			idx = nodes.Informer().GetIndexer()
		case *corev1.Service:
			idx = services.Informer().GetIndexer()
		case *discoveryv1.EndpointSlice:
			idx = eslices.Informer().GetIndexer()
		case *corev1.Pod:
			idx = podPods
			if o.Labels["app.kubernetes.io/component"] == "node" {
				idx = nodePods
			}
		}
		if err := idx.Add(slim); err != nil {
			t.Fatal(err)
		}
	}
	return &listers{
		nodes: nodes.Lister(), services: services.Lister(), slices: eslices.Lister(),
		nodePods: listersv1.NewPodLister(nodePods), podPods: listersv1.NewPodLister(podPods),
		rackLabel: testRack, port: testPort, apiHTTP2: HTTP2{Mode: HTTP2None},
	}
}

func TestSnapshot(t *testing.T) {
	t.Parallel()
	objs := []runtime.Object{
		node("n2", "192.0.2.2", true),
		node("n1", "192.0.2.1", true),
		node("cordoned", "192.0.2.3", true, func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		node("notready", "192.0.2.4", false),
		// A silent kubelet, as in a partition: the node stays, marked.
		node("silent", "192.0.2.7", true, func(n *corev1.Node) { n.Status.Conditions[1].Status = corev1.ConditionUnknown }),
		node("going", "192.0.2.5", true, deleting),
		node("noip", "", true, func(n *corev1.Node) { n.Status.Addresses = n.Status.Addresses[:1] }),
		node("v6only", "2001:db8::1", true),
		node("noready", "192.0.2.6", true, func(n *corev1.Node) { n.Status.Conditions = n.Status.Conditions[:1] }),
		// The node DaemonSet's pods only mark their nodes as agents.
		agentPod("prober-node-a", "node", "n1", "192.0.2.1", true),
		agentPod("prober-node-b", "node", "n2", "192.0.2.2", false),
		agentPod("prober-pod-a", "pod", "n1", "198.51.100.11", true),
		agentPod("prober-pod-b", "pod", "n2", "198.51.100.12", true),
		agentPod("prober-pod-notready", "pod", "n2", "198.51.100.13", false),
		agentPod("prober-pod-terminating", "pod", "n2", "198.51.100.14", true, deleting),
		agentPod("prober-pod-pending", "pod", "n2", "", false, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }),
		agentPod("prober-pod-succeeded", "pod", "n2", "198.51.100.15", true, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		// On a deleted Node, and on one being deleted: they went with
		// their machines, though the API server still has them Ready.
		agentPod("prober-pod-unknown-node", "pod", "gone", "198.51.100.16", true),
		agentPod("prober-pod-going-node", "pod", "going", "198.51.100.17", true),
		service("default", "kubernetes", clusterIP("198.51.100.1")),
		// A LoadBalancer: its ClusterIP and its ingress IPs.
		service("web", "front", loadBalancer("203.0.113.7", "203.0.113.8"), clusterIP("198.51.100.30")),
		service("web", "hostname-only", loadBalancer(), func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example.com"}}
		}),
		service("web", "not-annotated", loadBalancer("203.0.113.9"), clusterIP("198.51.100.31"), func(s *corev1.Service) { s.Annotations = nil }),
		service("web", "annotated-false", loadBalancer("203.0.113.10"), func(s *corev1.Service) { s.Annotations[ProbeAnnotation] = "false" }),
		service("web", "cluster-ip", clusterIP("198.51.100.20")),
		// Opted-in Services of every type: a ClusterIP one pinged over
		// h2c, a NodePort one, a dual-stack one (its IPv4 address); none
		// for a headless, an ExternalName or a UDP-only one; an unusable
		// http2 annotation leaves the Service unpinged.
		service("web", "api", clusterIP("198.51.100.21"), annotated("h2c")),
		service("web", "np", clusterIP("198.51.100.22"), annotated("tls"), func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }),
		service("web", "dual", annotated(""), func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "2001:db8::22", []string{"2001:db8::22", "198.51.100.23"}
		}),
		service("web", "headless", clusterIP("None"), annotated("h2c")),
		service("web", "external", annotated(""), func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.com"
		}),
		service("web", "udp", clusterIP("198.51.100.24"), annotated(""), func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}
		}),
		service("web", "bad-h2", clusterIP("198.51.100.25"), annotated("HTTP2")),
		// Endpoints: the API server on n1 and an address that is no peer;
		// web/api's ready agent pod, a NotReady one, a terminating node
		// (still serving, readiness unset), a node of unknown readiness (ready), an address
		// that is no peer, and an IPv6 slice; a Service of the same name
		// in another namespace does not count; web/front on n2.
		slice("default", "kubernetes", "kubernetes", ep("192.0.2.1", "y", "y", ""), ep("203.0.113.60", "y", "y", "")),
		slice("web", "api", "api-1", ep("198.51.100.11", "y", "y", "n"), ep("198.51.100.12", "n", "n", "n"),
			ep("192.0.2.2", "", "y", "y"), ep("192.0.2.3", "", "", ""), ep("203.0.113.50", "y", "y", "")),
		func() *discoveryv1.EndpointSlice {
			s := slice("web", "api", "api-v6", ep("2001:db8::5", "y", "y", ""))
			s.AddressType = discoveryv1.AddressTypeIPv6
			return s
		}(),
		slice("other", "api", "api-x", ep("192.0.2.7", "y", "y", "")),
		slice("web", "front", "front-1", ep("192.0.2.2", "y", "y", "")),
	}
	l := testListers(t, objs...)
	l.lb = netip.MustParseAddrPort("203.0.113.1:6443")
	api := HTTP2{Mode: HTTP2TLS, APIServer: true, ServerName: APIServerName}
	l.apiHTTP2 = api
	var bad []string
	l.badHTTP2 = func(key, value string) { bad = append(bad, key+"="+value) }
	got := l.snapshot()
	none := HTTP2{Mode: HTTP2None}
	want := []Peer{
		{Name: "cordoned", Class: ClassNode, Addr: netip.MustParseAddr("192.0.2.3"), Port: testPort, Unschedulable: true,
			Labels: map[string]string{LabelNode: "cordoned", LabelZone: "z1", LabelRack: "r1"}},
		{Name: "n1", Class: ClassNode, Addr: netip.MustParseAddr("192.0.2.1"), Port: testPort, Agent: true, AgentPod: "prober-node-a",
			Labels: map[string]string{LabelNode: "n1", LabelZone: "z1", LabelRack: "r1"}},
		{Name: "n2", Class: ClassNode, Addr: netip.MustParseAddr("192.0.2.2"), Port: testPort,
			Labels: map[string]string{LabelNode: "n2", LabelZone: "z1", LabelRack: "r1"}},
		{Name: "silent", Class: ClassNode, Addr: netip.MustParseAddr("192.0.2.7"), Port: testPort,
			Labels: map[string]string{LabelNode: "silent", LabelZone: "z1", LabelRack: "r1", LabelReady: "unknown"}},
		// An IPv6-only node is probed over IPv6.
		{Name: "v6only", Class: ClassNode, Addr: netip.MustParseAddr("2001:db8::1"), Port: testPort,
			Labels: map[string]string{LabelNode: "v6only", LabelZone: "z1", LabelRack: "r1"}},
		{Name: "prober-pod-a", Class: ClassPod, Addr: netip.MustParseAddr("198.51.100.11"), Port: testPort, Agent: true, AgentPod: "prober-pod-a",
			Labels: map[string]string{LabelNode: "n1", LabelZone: "z1", LabelRack: "r1"}},
		{Name: "prober-pod-b", Class: ClassPod, Addr: netip.MustParseAddr("198.51.100.12"), Port: testPort, Agent: true, AgentPod: "prober-pod-b",
			Labels: map[string]string{LabelNode: "n2", LabelZone: "z1", LabelRack: "r1"}},
		{Name: APIServerLBName, Class: ClassLB, Addr: netip.MustParseAddr("203.0.113.1"), Port: 6443, Backends: []string{"n1"}, HTTP2: api},
		{Name: "default/kubernetes", Class: ClassLB, Addr: netip.MustParseAddr("198.51.100.1"), Port: 443, Backends: []string{"n1"}, HTTP2: api},
		{Name: "web/api", Class: ClassLB, Addr: netip.MustParseAddr("198.51.100.21"), Port: 443,
			Backends: []string{"cordoned", "prober-pod-a"}, HTTP2: HTTP2{Mode: HTTP2H2C}},
		{Name: "web/bad-h2", Class: ClassLB, Addr: netip.MustParseAddr("198.51.100.25"), Port: 443, HTTP2: none},
		// A dual-stack Service: both cluster IPs, IPv4 first.
		{Name: "web/dual", Class: ClassLB, Addr: netip.MustParseAddr("198.51.100.23"), Addr6: netip.MustParseAddr("2001:db8::22"), Port: 443, HTTP2: none},
		{Name: "web/front", Class: ClassLB, Addr: netip.MustParseAddr("198.51.100.30"), Port: 8443, Backends: []string{"n2"}, HTTP2: none},
		{Name: "web/front@203.0.113.7", Class: ClassLB, Addr: netip.MustParseAddr("203.0.113.7"), Port: 8443, Backends: []string{"n2"}, HTTP2: none},
		{Name: "web/front@203.0.113.8", Class: ClassLB, Addr: netip.MustParseAddr("203.0.113.8"), Port: 8443, Backends: []string{"n2"}, HTTP2: none},
		{Name: "web/np", Class: ClassLB, Addr: netip.MustParseAddr("198.51.100.22"), Port: 443,
			HTTP2: HTTP2{Mode: HTTP2TLS, InsecureSkipVerify: true}},
	}
	if !equalSnapshots(got, want) {
		t.Errorf("snapshot:\n got %v\nwant %v", got, want)
		for i := range min(len(got), len(want)) {
			if !got[i].Equal(want[i]) {
				t.Errorf("first difference at %d:\n got %+v\nwant %+v", i, got[i], want[i])
				break
			}
		}
	}
	if !slices.Equal(bad, []string{"web/bad-h2=HTTP2"}) {
		t.Errorf("unusable http2 annotations reported: %v, want web/bad-h2=HTTP2", bad)
	}
	// The Services whose EndpointSlices are watched: those giving peers.
	keys := l.probedServices()
	if want := []string{"default/kubernetes", "web/api", "web/bad-h2", "web/dual", "web/front", "web/np"}; !slices.Equal(keys, want) {
		t.Errorf("probed Services %v, want %v", keys, want)
	}
	if got, want := serviceNames(append(keys, "other/api")), []string{"api", "bad-h2", "dual", "front", "kubernetes", "np"}; !slices.Equal(got, want) {
		t.Errorf("selected Service names %v, want %v", got, want)
	}
	// Deterministic: the same caches give the same snapshot.
	if again := l.snapshot(); !equalSnapshots(got, again) {
		t.Errorf("second snapshot differs: %v", names(again))
	}
}

func TestTransformKeepsOnlyWhatIsRead(t *testing.T) {
	t.Parallel()
	n := node("n1", "192.0.2.1", true, func(n *corev1.Node) {
		n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
		n.Annotations = map[string]string{"big": "annotation"}
	})
	slim := transform(testRack)
	got, _ := slim(n)
	sn := got.(*corev1.Node)
	if sn.ManagedFields != nil || sn.Annotations != nil || sn.Status.Images != nil || len(sn.Status.Conditions) != 1 ||
		len(sn.Status.Addresses) != 1 || len(sn.Labels) != 2 || sn.ResourceVersion != "1" {
		t.Errorf("slim node kept too much or too little: %+v", sn)
	}
	if len(n.Status.Images) != 1 || n.ManagedFields == nil {
		t.Error("transform modified its input")
	}
	p, _ := slim(agentPod("p", "pod", "n1", "198.51.100.1", true))
	if sp := p.(*corev1.Pod); sp.Labels != nil || sp.Spec.Containers != nil || sp.Status.PodIP == "" {
		t.Errorf("slim pod: %+v", sp)
	}
	// A dual-stack pod keeps its address of each family: a real
	// dual-stack cluster's pod_to_pod had no IPv6 cell without them.
	dual := agentPod("p", "pod", "n1", "198.51.100.1", true)
	dual.Status.PodIPs = []corev1.PodIP{{IP: "198.51.100.1"}, {IP: "2001:db8::1"}}
	p, _ = slim(dual)
	if pr, ok := podPeer(p.(*corev1.Pod), n, testRack, testPort); !ok || pr.Addr6 != netip.MustParseAddr("2001:db8::1") {
		t.Errorf("slim dual-stack pod's peer: %+v, %v; want its IPv6 address too", pr, ok)
	}
	s, _ := slim(service("web", "front", loadBalancer("203.0.113.7"), clusterIP("198.51.100.30"), func(s *corev1.Service) {
		s.Annotations[HTTP2Annotation] = "h2c"
	}))
	if ss := s.(*corev1.Service); len(ss.Annotations) != 2 || ss.Annotations[HTTP2Annotation] != "h2c" ||
		len(ss.Status.LoadBalancer.Ingress) != 1 || len(ss.Spec.ClusterIPs) != 1 {
		t.Errorf("slim service: %+v", ss)
	}
	full := ep("192.0.2.2", "y", "y", "n")
	full.Zone = ptr("z1")
	full.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: "front-abc", Namespace: "web", UID: "u1", ResourceVersion: "7"}
	e, _ := slim(slice("web", "front", "front-1", full))
	if se := e.(*discoveryv1.EndpointSlice); len(se.Labels) != 1 || se.Labels[ServiceNameLabel] != "front" || len(se.Ports) != 1 ||
		se.AddressType != discoveryv1.AddressTypeIPv4 || len(se.Endpoints) != 1 || *se.Endpoints[0].NodeName != "n1" || se.Endpoints[0].Zone != nil ||
		*se.Endpoints[0].TargetRef != (corev1.ObjectReference{Kind: "Pod", Name: "front-abc"}) ||
		se.Endpoints[0].Addresses[0] != "192.0.2.2" || !*se.Endpoints[0].Conditions.Ready || *se.Endpoints[0].Conditions.Terminating {
		t.Errorf("slim endpointslice kept too much or too little: %+v", se)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "n1", Obj: n}
	if got, _ := slim(tomb); got != any(tomb) {
		t.Errorf("tombstone changed: %v", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := New(fake.NewClientset(), Config{NodeAgentSelector: "a in (", PodAgentSelector: ""}, slog.New(slog.DiscardHandler))
	for _, w := range []string{"kubernetes.nodeAgentSelector", "kubernetes.podAgentSelector: required", "kubernetes.namespace", "kubernetes.agentPort"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not name %s", err, w)
		}
	}
}

// TestRunFollowsChanges drives Run through the fake clientset's watches:
// the initial snapshot, an added Node, a pod turning NotReady and one
// terminating, each leaving or joining in the next snapshot.
func TestRunFollowsChanges(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset(
		node("n1", "192.0.2.1", true),
		agentPod("prober-pod-a", "pod", "n1", "198.51.100.11", true),
		agentPod("prober-pod-b", "pod", "n1", "198.51.100.12", true),
		service("default", "kubernetes", func(s *corev1.Service) { s.Spec.ClusterIP = "198.51.100.1" }),
	)
	d, err := New(client, Config{Namespace: testNS, NodeAgentSelector: nodeSel, PodAgentSelector: podSel,
		AgentPort: testPort, Settle: testSettleD}, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
	expect := func(step string, want ...string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ps := <-snaps:
				if slices.Equal(names(ps), want) {
					return
				}
				t.Logf("%s: intermediate snapshot %v", step, names(ps))
			case <-deadline:
				t.Fatalf("%s: no snapshot %v within 10s", step, want)
			}
		}
	}
	expect("initial", "node:n1", "pod:prober-pod-a", "pod:prober-pod-b", "lb:default/kubernetes")

	core := client.CoreV1()
	if _, err := core.Nodes().Create(ctx, node("n2", "192.0.2.2", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("node added", "node:n1", "node:n2", "pod:prober-pod-a", "pod:prober-pod-b", "lb:default/kubernetes")

	if _, err := core.Pods(testNS).UpdateStatus(ctx, agentPod("prober-pod-a", "pod", "n1", "198.51.100.11", false,
		func(p *corev1.Pod) { p.ResourceVersion = "2" }), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("pod not ready", "node:n1", "node:n2", "pod:prober-pod-b", "lb:default/kubernetes")

	if _, err := core.Pods(testNS).Update(ctx, agentPod("prober-pod-b", "pod", "n1", "198.51.100.12", true,
		deleting, func(p *corev1.Pod) { p.ResourceVersion = "2" }), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("pod terminating", "node:n1", "node:n2", "lb:default/kubernetes")

	if err := core.Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("node deleted", "node:n2", "lb:default/kubernetes")

	// A pod of another selector or namespace is never seen.
	other := agentPod("stranger", "pod", "n2", "198.51.100.30", true)
	other.Namespace = "elsewhere"
	if _, err := core.Pods("elsewhere").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ps := <-snaps:
		t.Errorf("snapshot after an unrelated pod: %v", names(ps))
	case <-time.After(10 * testSettleD):
	}
}

func TestRunReturnsCtxErrBeforeSync(t *testing.T) {
	t.Parallel()
	d, err := New(fake.NewClientset(), Config{Namespace: testNS, NodeAgentSelector: nodeSel, PodAgentSelector: podSel, AgentPort: testPort},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	if err := d.Run(ctx, func([]Peer) { called = true }); err == nil || called {
		t.Errorf("Run on a cancelled ctx = %v, emitted %v; want ctx error, nothing emitted", err, called)
	}
}

// TestPlan: the plan's peers are the agents and the LBs; agentless Nodes
// are left out; agents are pulled at their address and port.
func TestPlan(t *testing.T) {
	t.Parallel()
	// RFC 5737 addresses: nothing is dialled.
	ps := []Peer{
		{Name: "n1", Class: ClassNode, Addr: netip.MustParseAddr("192.0.2.1"), Port: 9808, Agent: true,
			Labels: map[string]string{LabelNode: "n1", LabelRack: "r1"}},
		{Name: "n2", Class: ClassNode, Addr: netip.MustParseAddr("192.0.2.2"), Port: 9808},
		{Name: "prober-pod-x", Class: ClassPod, Addr: netip.MustParseAddr("198.51.100.7"), Port: 9808, Agent: true,
			Labels: map[string]string{LabelNode: "n1"}},
		{Name: "default/kubernetes", Class: ClassLB, Addr: netip.MustParseAddr("203.0.113.1"), Port: 443,
			Backends: []string{"n1"}, HTTP2: HTTP2{Mode: HTTP2TLS, APIServer: true, ServerName: APIServerName}},
	}
	plan, agents := Plan(ps)
	want := map[string]string{"n1": "http://192.0.2.1:9808", "prober-pod-x": "http://198.51.100.7:9808"}
	if !maps.Equal(agents, want) {
		t.Errorf("agents = %v, want %v (agents on nodes and pods only, not LBs or agentless nodes)", agents, want)
	}
	var got []string
	for _, p := range plan {
		got = append(got, p.Class+":"+p.Name+"@"+p.Address)
	}
	if w := []string{"node:n1@192.0.2.1", "pod:prober-pod-x@198.51.100.7", "lb:default/kubernetes@203.0.113.1"}; !slices.Equal(got, w) {
		t.Errorf("plan peers %v, want %v", got, w)
	}
	if plan[1].Node != "n1" || plan[0].Labels[LabelRack] != "r1" || plan[2].Port != 443 || !slices.Equal(plan[2].Backends, []string{"n1"}) {
		t.Errorf("plan peers lost fields: %+v", plan)
	}
	if h := plan[2].HTTP2; h == nil || h.Mode != HTTP2TLS || !h.APIServer || h.ServerName != APIServerName {
		t.Errorf("the API server VIP's http2: %+v", h)
	}
	if plan[0].HTTP2 != nil {
		t.Errorf("a node's http2: %+v, want the class default (nil)", plan[0].HTTP2)
	}
}

// TestMatrixConfig: the matrix's discovery from its config's defaults is
// valid, pings the API server's VIPs over TLS and settles in half a
// second (a terminating pod leaves every plan within 2 s).
func TestMatrixConfig(t *testing.T) {
	t.Parallel()
	k := &config.Kubernetes{RackLabel: "example.com/rack", APIServerLB: "203.0.113.10:6443"}
	k.SetDefaults()
	c := MatrixConfig(k)
	if _, err := New(fake.NewClientset(), c, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	if !c.APIServerHTTP2 || c.Settle != 500*time.Millisecond || c.RackLabel != k.RackLabel ||
		c.APIServerLB.String() != k.APIServerLB || int(c.AgentPort) != k.AgentPort || c.Namespace != k.Namespace {
		t.Errorf("MatrixConfig(%+v) = %+v", k, c)
	}
}

// TestDualStackPeers: a dual-stack Node or pod is one peer with an
// address per family, IPv4 first whatever the API's order, and the plan
// carries both.
func TestDualStackPeers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ips       []string
		addr, six string
		wantNone  bool
	}{
		{ips: []string{"2001:db8::1", "192.0.2.1"}, addr: "192.0.2.1", six: "2001:db8::1"},
		{ips: []string{"192.0.2.1", "192.0.2.2", "2001:db8::1", "2001:db8::2"}, addr: "192.0.2.1", six: "2001:db8::1"},
		{ips: []string{"fe80::1", "2001:db8::3"}, addr: "2001:db8::3"},
		{ips: []string{"192.0.2.4"}, addr: "192.0.2.4"},
		{ips: []string{"::", "garbage", "fe80::1%eth0"}, wantNone: true},
	}
	for _, c := range cases {
		addr, six := dualStack(c.ips)
		if c.wantNone {
			if addr.IsValid() || six.IsValid() {
				t.Errorf("%v: %v %v, want none", c.ips, addr, six)
			}
			continue
		}
		if addr.String() != c.addr || (c.six == "") == six.IsValid() || (c.six != "" && six.String() != c.six) {
			t.Errorf("%v: %v %v, want %s %s", c.ips, addr, six, c.addr, c.six)
		}
	}
	p := Peer{Name: "n1", Class: ClassNode, Addr: netip.MustParseAddr("192.0.2.1"), Addr6: netip.MustParseAddr("2001:db8::1"), Port: testPort}
	w := Wire([]Peer{p})[0]
	if w.Address != "192.0.2.1" || !slices.Equal(w.Addresses, []string{"192.0.2.1", "2001:db8::1"}) {
		t.Errorf("wire: %+v, want both addresses", w)
	}
	p.Addr6 = netip.Addr{}
	if w := Wire([]Peer{p})[0]; w.Addresses != nil {
		t.Errorf("single-stack wire: addresses %v, want none", w.Addresses)
	}
}
