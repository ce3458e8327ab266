package peers_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/netprober/prober/peers"
	"github.com/netprober/prober/peers/peerstest"
	"github.com/netprober/prober/probe"
)

// apiMetric sums the API server's own metric name over the lines holding
// every one of match.
func apiMetric(t *testing.T, s *peerstest.Server, name string, match ...string) float64 {
	t.Helper()
	body, err := s.Get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
lines:
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		for _, m := range match {
			if !strings.Contains(line, m) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// sliceLoad is what the API server counts for EndpointSlices: LIST
// requests, WATCH requests ended, watches open, and watch events sent to
// clients (every watcher's copy of an event counts). The API server
// itself keeps one EndpointSlice watch open, hence differences.
type sliceLoad struct{ lists, watchesEnded, watchesOpen, events float64 }

func endpointSliceLoad(t *testing.T, s *peerstest.Server) sliceLoad {
	t.Helper()
	const res = `resource="endpointslices"`
	return sliceLoad{
		lists:        apiMetric(t, s, "apiserver_request_total", res, `verb="LIST"`),
		watchesEnded: apiMetric(t, s, "apiserver_request_total", res, `verb="WATCH"`),
		watchesOpen:  apiMetric(t, s, "apiserver_longrunning_requests", res, `verb="WATCH"`),
		events:       apiMetric(t, s, "apiserver_watch_events_total", res),
	}
}

// bookmarks bounds the watch events a few quiet seconds may still count:
// the API server sends every open watch a bookmark about once a minute, and
// apiserver_watch_events_total counts them like changes.
func bookmarks(t *testing.T, s *peerstest.Server) float64 {
	t.Helper()
	return endpointSliceLoad(t, s).watchesOpen
}

func (a sliceLoad) minus(b sliceLoad) sliceLoad {
	return sliceLoad{a.lists - b.lists, a.watchesEnded - b.watchesEnded, a.watchesOpen - b.watchesOpen, a.events - b.events}
}

func (a sliceLoad) String() string {
	return fmt.Sprintf("%+g LIST, %+g WATCH ended, %+g open, %+g watch events sent", a.lists, a.watchesEnded, a.watchesOpen, a.events)
}

// createSlice writes an EndpointSlice of the Service default/svc, as the
// endpointslice controller would (a bare API server runs none).
func createSlice(ctx context.Context, c kubernetes.Interface, svc, name string, eps ...discoveryv1.Endpoint) error {
	port, proto := int32(8080), corev1.ProtocolTCP
	_, err := c.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{peers.ServiceNameLabel: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: &port, Protocol: &proto}},
		Endpoints:   eps,
	}, metav1.CreateOptions{})
	return err
}

// churnNoise changes the address of ep-noise's endpoint n times, the last
// to addr4(last).
func churnNoise(t *testing.T, c kubernetes.Interface, n, last int) {
	t.Helper()
	ctx := t.Context()
	for i := range n {
		sl, err := c.DiscoveryV1().EndpointSlices("default").Get(ctx, "ep-noise-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ip := addr4(5000 + i)
		if i == n-1 {
			ip = addr4(last)
		}
		sl.Endpoints[0].Addresses = []string{ip}
		if _, err := c.DiscoveryV1().EndpointSlices("default").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func endpoint(ip string, ready bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
}

func createService(ctx context.Context, c kubernetes.Interface, name string, annotations map[string]string) error {
	_, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	return err
}

func backendsOf(ps []peers.Peer, name string) ([]string, bool) {
	for _, p := range ps {
		if p.Class == peers.ClassLB && p.Name == name {
			return p.Backends, true
		}
	}
	return nil, false
}

// TestKubeDiscoveryEndpoints: lb peers carry their Services' ready
// endpoints that are peers, from the real API server's EndpointSlices
// (the kubernetes Service's written by the API server itself), and the
// EndpointSlice watch costs what the docs say: one LIST and one WATCH,
// another pair when a Service is opted in or out, and no event for the
// endpoints of Services nobody probes.
func TestKubeDiscoveryEndpoints(t *testing.T) {
	s := apiServer(t)
	deployed(t, s)
	admin, err := s.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// The API server publishes its advertise address in the kubernetes
	// Service's EndpointSlice: a Node at that address is where it runs
	// (nothing is dialled).
	for i, n := range []struct{ name, ip string }{{"ep-cp", peerstest.AdvertiseAddress}, {"ep-0", addr4(3000)}, {"ep-1", addr4(3001)}} {
		if err := createNode(ctx, admin, n.name, n.ip); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if err := createAgentPod(ctx, admin, "prober-pod-"+n.name, "pod", n.name, addr4(3100+i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := createService(ctx, admin, "ep-web", map[string]string{peers.ProbeAnnotation: "true", peers.HTTP2Annotation: "h2c"}); err != nil {
		t.Fatal(err)
	}
	// ep-web: a node and an agent pod, ready; a node not ready; an
	// address that is no peer.
	if err := createSlice(ctx, admin, "ep-web", "ep-web-a", endpoint(addr4(3000), true), endpoint(addr4(3101), true),
		endpoint(addr4(3001), false), endpoint("203.0.113.77", true)); err != nil {
		t.Fatal(err)
	}
	// ep-noise is not probed: its endpoints must cost discovery nothing.
	if err := createService(ctx, admin, "ep-noise", nil); err != nil {
		t.Fatal(err)
	}
	if err := createSlice(ctx, admin, "ep-noise", "ep-noise-a", endpoint(addr4(3001), true)); err != nil {
		t.Fatal(err)
	}

	// The API server's own EndpointSlice watchers get every change; count
	// their events per change first, to tell discovery's apart below.
	before := endpointSliceLoad(t, s)
	churnNoise(t, admin, 20, 4000)
	calib := endpointSliceLoad(t, s).minus(before)
	// Rounded: a watch bookmark (below) may fall into the calibration.
	internal := math.Round(calib.events / 20)
	t.Logf("EndpointSlices, 20 changes before discovery: %s (the API server's own watchers: %g events per change)", calib, internal)

	before = endpointSliceLoad(t, s)
	w := startDiscovery(t, s, "endpoints", 200*time.Millisecond)
	ps := w.await(t, "backends", 30*time.Second, func(ps []peers.Peer) bool {
		api, _ := backendsOf(ps, "default/kubernetes")
		web, _ := backendsOf(ps, "default/ep-web")
		return slices.Equal(api, []string{"ep-cp"}) && slices.Equal(web, []string{"ep-0", "prober-pod-ep-0"})
	})
	if lb, _ := backendsOf(ps, peers.APIServerLBName); !slices.Equal(lb, []string{"ep-cp"}) {
		t.Errorf("apiserver-lb backends %v, want the kubernetes Service's [ep-cp]", lb)
	}
	if _, ok := backendsOf(ps, "default/ep-noise"); ok {
		t.Error("a Service that is not opted in became a peer")
	}
	time.Sleep(time.Second)
	start := endpointSliceLoad(t, s).minus(before)
	t.Logf("EndpointSlices, discovery's start: %s", start)
	if start.lists != 1 || start.watchesOpen != 1 || start.watchesEnded != 0 {
		t.Errorf("EndpointSlices at start: %s; want 1 LIST and 1 watch opened", start)
	}

	// 100 changes of ep-noise's endpoints: a cluster-wide watch would
	// send each to every agent; the selected one sends none.
	mark := endpointSliceLoad(t, s)
	churnNoise(t, admin, 100, 3001) // ends at ep-1, for when it is opted in below
	// ep-web's pod backend turns NotReady: one event, and it leaves.
	sl, err := admin.DiscoveryV1().EndpointSlices("default").Get(ctx, "ep-web-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl.Endpoints[1].Conditions.Ready = new(bool)
	if _, err := admin.DiscoveryV1().EndpointSlices("default").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.await(t, "NotReady backend gone", 10*time.Second, func(ps []peers.Peer) bool {
		web, _ := backendsOf(ps, "default/ep-web")
		return slices.Equal(web, []string{"ep-0"})
	})
	churn := endpointSliceLoad(t, s).minus(mark)
	ours := churn.events - 101*internal
	t.Logf("EndpointSlices, 100 changes of an unprobed Service's and 1 of a probed one's: %s, of which %g to discovery (a cluster-wide watch: 101)", churn, ours)
	if ours < 1 || ours > 1+bookmarks(t, s) || churn.lists != 0 {
		t.Errorf("EndpointSlices during churn: %s, %g events to discovery; want the probed Service's 1 event and no LIST", churn, ours)
	}

	// Opting ep-noise in replaces the informer: one more LIST and WATCH,
	// the old watch ends, and its backends follow.
	mark = endpointSliceLoad(t, s)
	svc, err := admin.CoreV1().Services("default").Get(ctx, "ep-noise", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Annotations = map[string]string{peers.ProbeAnnotation: "true"}
	if _, err := admin.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ps = w.await(t, "opted-in Service's backends", 10*time.Second, func(ps []peers.Peer) bool {
		noise, _ := backendsOf(ps, "default/ep-noise")
		return slices.Equal(noise, []string{"ep-1"})
	})
	for _, name := range []string{"default/kubernetes", "default/ep-web"} {
		if b, _ := backendsOf(ps, name); len(b) != 1 {
			t.Errorf("%s backends %v across the informer's replacement", name, b)
		}
	}
	time.Sleep(time.Second)
	optIn := endpointSliceLoad(t, s).minus(mark)
	t.Logf("EndpointSlices, a Service opted in: %s", optIn)
	if optIn.lists != 1 || optIn.watchesEnded != 1 || optIn.watchesOpen != 0 {
		t.Errorf("EndpointSlices when a Service is opted in: %s; want 1 LIST, the replaced WATCH ended, as many open", optIn)
	}

	// Quiet: no request at all.
	mark = endpointSliceLoad(t, s)
	time.Sleep(5 * time.Second)
	if quiet := endpointSliceLoad(t, s).minus(mark); quiet.lists != 0 || quiet.watchesEnded != 0 || quiet.events > bookmarks(t, s) {
		t.Errorf("EndpointSlices in 5 quiet seconds: %s; want nothing but watch bookmarks", quiet)
	}
}

// TestKubeAPIServerPing is what a node agent does to the API server
// through the kubernetes Service: HTTP/2 PINGs over TLS, verified with
// the CA a pod's ServiceAccount holds and the name kubernetes.default.svc,
// with no credential and no request. On loopback. With PROBER_KUBE_IDLE
// set it also holds the connection for 100 s and logs when the API
// server's HTTP/2 idle timeout (90 s; PINGs do not reset it) replaced it.
func TestKubeAPIServerPing(t *testing.T) {
	s := apiServer(t)
	ap, err := netip.ParseAddrPort(strings.TrimPrefix(s.URL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	pinger := func(serverName string) *probe.HTTP2Pinger {
		t.Helper()
		p, err := probe.NewHTTP2Pinger(probe.Target{Addr: ap.Addr(), Port: ap.Port()}, probe.HTTP2Config{
			TLS: true, CAFile: s.CAFile(), ServerName: serverName, Timeout: 2 * time.Second, DeadAfter: 3,
			MinBackoff: time.Second, MaxBackoff: 10 * time.Second, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	ctx := t.Context()
	p := pinger(peers.APIServerName)
	for i := range 3 {
		if r := p.Ping(ctx); r.Outcome != probe.OK {
			t.Fatalf("PING %d to the API server: %v %s %v", i, r.Outcome, r.Reason, r.Err)
		}
	}
	for reason, n := range p.Resets() {
		if n != 0 {
			t.Errorf("%d %s resets on a healthy connection", n, reason)
		}
	}
	// A name the certificate does not carry fails verification: the
	// target answered, so refused, not lost.
	if r := pinger("api.example.com").Ping(ctx); r.Outcome != probe.Refused || r.Reason != "tls" {
		t.Errorf("PING with a wrong server name: %v %q, want refused tls", r.Outcome, r.Reason)
	}
	if os.Getenv("PROBER_KUBE_IDLE") == "" {
		return
	}
	start := time.Now()
	for time.Since(start) < 100*time.Second {
		r := p.Ping(ctx)
		if n := p.Resets()["goaway"]; n > 0 {
			t.Logf("GOAWAY replaced the connection %s after the first PING; PING outcome %v", time.Since(start).Round(time.Second), r.Outcome)
			return
		}
		time.Sleep(time.Second)
	}
	t.Logf("no GOAWAY in 100 s: resets %v", p.Resets())
}

// TestKubeDiscoveryDNS: the cluster DNS from a real API server, as
// kubeadm's CoreDNS addon lays it out (Service kube-system/kube-dns, its
// EndpointSlice naming the pods): its VIP an lb peer asked on the dns
// port, each ready CoreDNS pod a peer of its own, the VIP's backends;
// when the Service loses its endpoints, the endpoints go and the VIP
// stays, with none.
func TestKubeDiscoveryDNS(t *testing.T) {
	s := apiServer(t)
	deployed(t, s)
	admin, err := s.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := createNode(ctx, admin, "dns-n1", addr4(6001)); err != nil {
		t.Fatal(err)
	}
	const ns = "kube-system"
	svc, err := admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.CoreV1().Services(ns).Delete(context.Background(), "kube-dns", metav1.DeleteOptions{})
		admin.DiscoveryV1().EndpointSlices(ns).Delete(context.Background(), "kube-dns-a", metav1.DeleteOptions{})
	})
	pod := func(name, ip string, ready bool) discoveryv1.Endpoint {
		e := endpoint(ip, ready)
		e.NodeName = new(string)
		*e.NodeName = "dns-n1"
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name, UID: types.UID("u-" + name)}
		return e
	}
	port, udp, portName := int32(53), corev1.ProtocolUDP, "dns"
	slice, err := admin.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kube-dns-a", Labels: map[string]string{peers.ServiceNameLabel: "kube-dns"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &udp}},
		Endpoints:   []discoveryv1.Endpoint{pod("coredns-a", addr4(6101), true), pod("coredns-b", addr4(6102), false)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := startDiscoveryWith(t, s, "dns", 200*time.Millisecond, func(c *peers.Config) {
		c.DNSNamespace, c.DNSService, c.DNSQuery = ns, "kube-dns", probe.DefaultDNSQuery
	})
	find := func(ps []peers.Peer, name string) (peers.Peer, bool) {
		i := slices.IndexFunc(ps, func(p peers.Peer) bool { return p.Name == name })
		if i < 0 {
			return peers.Peer{}, false
		}
		return ps[i], true
	}
	ps := w.await(t, "the DNS and its endpoint", 30*time.Second, func(ps []peers.Peer) bool {
		vip, ok := find(ps, "kube-system/kube-dns")
		return ok && slices.Equal(vip.Backends, []string{"kube-system/coredns-a"})
	})
	vip, _ := find(ps, "kube-system/kube-dns")
	if vip.Class != peers.ClassLB || vip.Port != 53 || vip.DNS != probe.DefaultDNSQuery || vip.Addr.String() != svc.Spec.ClusterIP {
		t.Errorf("the DNS VIP: %v, dns %q; want lb at the ClusterIP %s port 53", vip, vip.DNS, svc.Spec.ClusterIP)
	}
	ep, ok := find(ps, "kube-system/coredns-a")
	if !ok || ep.Class != peers.ClassPod || ep.Agent || ep.Port != 53 || ep.Addr.String() != addr4(6101) || ep.Labels[peers.LabelNode] != "dns-n1" || ep.DNS == "" {
		t.Errorf("the ready CoreDNS endpoint: %v (found %v), labels %v, dns %q", ep, ok, ep.Labels, ep.DNS)
	}
	if _, ok := find(ps, "kube-system/coredns-b"); ok {
		t.Error("a NotReady CoreDNS endpoint is a peer")
	}
	// The Service loses its endpoints (CoreDNS scaled to zero).
	slice.Endpoints = nil
	if _, err := admin.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.await(t, "the DNS without endpoints", 10*time.Second, func(ps []peers.Peer) bool {
		vip, ok := find(ps, "kube-system/kube-dns")
		_, stale := find(ps, "kube-system/coredns-a")
		return ok && len(vip.Backends) == 0 && !stale
	})
}
