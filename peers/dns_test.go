package peers

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/probe"
)

// kubeDNS is a cluster DNS Service as kubeadm's CoreDNS addon makes it
// (kube-dns: dns/UDP, dns-tcp/TCP, metrics), opted in too, which must not
// make it two peers.
func kubeDNS(mods ...func(*corev1.Service)) *corev1.Service {
	return service("kube-system", "kube-dns", append([]func(*corev1.Service){clusterIP("198.51.100.10"), annotated(""), func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}, {Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP}}
	}}, mods...)...)
}

// coreDNS is the slice of kube-dns with an endpoint per pod on node, ready
// or not; dns on 5353 in the pods (a targetPort other than the Service's).
func coreDNS(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	s := slice("kube-system", "kube-dns", "kube-dns-1", eps...)
	s.Ports = []discoveryv1.EndpointPort{{Name: ptr("dns"), Protocol: ptr(corev1.ProtocolUDP), Port: ptr(int32(5353))},
		{Name: ptr("dns-tcp"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(5353))}}
	return s
}

func dnsEndpoint(pod, ip, nodeName string, ready bool) discoveryv1.Endpoint {
	r := "n"
	if ready {
		r = "y"
	}
	e := ep(ip, r, r, "")
	e.NodeName = &nodeName
	if pod != "" {
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: pod}
	}
	return e
}

// TestDNSPeers: the cluster DNS's VIP is an lb peer asked on its dns
// port, each ready endpoint a pod peer of its own asked on the pods'
// port, labelled with its node's topology, and the VIP's backends are
// those endpoints; an endpoint on a node's own address (a DNS on the
// host network) is that node, not a second peer.
func TestDNSPeers(t *testing.T) {
	t.Parallel()
	objs := []runtime.Object{
		node("n1", "192.0.2.1", true), node("n2", "192.0.2.2", true),
		kubeDNS(),
		coreDNS(dnsEndpoint("coredns-a", "198.51.100.21", "n1", true), dnsEndpoint("coredns-b", "198.51.100.22", "n2", false),
			dnsEndpoint("", "192.0.2.2", "n2", true), dnsEndpoint("", "198.51.100.23", "n9", true)),
	}
	l := testListers(t, objs...)
	l.dns = dnsService{namespace: "kube-system", name: "kube-dns", query: probe.DefaultDNSQuery}
	ps := l.snapshot()
	got := map[string]Peer{}
	for _, p := range ps {
		if _, dup := got[p.Name]; dup {
			t.Errorf("%s listed twice", p.Name)
		}
		got[p.Name] = p
	}
	vip, a, other := got["kube-system/kube-dns"], got["kube-system/coredns-a"], got["kube-system/kube-dns@198.51.100.23"]
	if vip.Class != ClassLB || vip.Port != 53 || vip.DNS != probe.DefaultDNSQuery || vip.HTTP2.Mode != HTTP2None ||
		!slices.Equal(vip.Backends, []string{"kube-system/coredns-a", "kube-system/kube-dns@198.51.100.23", "n2"}) {
		t.Errorf("the DNS VIP: %+v", vip)
	}
	if a.Class != ClassPod || a.Port != 5353 || a.DNS != probe.DefaultDNSQuery || !a.DNSOnly || vip.DNSOnly || a.Agent || a.Labels[LabelNode] != "n1" || a.Labels[LabelRack] != "r1" {
		t.Errorf("a CoreDNS endpoint: %+v", a)
	}
	if other.Class != ClassPod || other.Labels[LabelNode] != "n9" {
		t.Errorf("an endpoint that names no pod, on a node the cache lacks: %+v", other)
	}
	if _, ok := got["kube-system/coredns-b"]; ok {
		t.Error("a NotReady endpoint is a peer")
	}
	if n2 := got["n2"]; n2.DNS != "" {
		t.Errorf("a node hosting a host-network DNS: %+v, want no DNS question on the node's own peer", n2)
	}
	if !slices.Contains(l.probedServices(), "kube-system/kube-dns") {
		t.Errorf("probed services %v lack the DNS: its slices would not be watched", l.probedServices())
	}
	// The plan keeps the endpoints, which run no agent, and asks them.
	plan, agents := Plan(ps)
	if _, ok := agents["kube-system/coredns-a"]; ok {
		t.Error("a DNS endpoint is pulled as an agent")
	}
	var wired *api.Peer
	for i := range plan {
		if plan[i].Name == "kube-system/coredns-a" {
			wired = &plan[i]
		}
	}
	if wired == nil || wired.DNS == nil || wired.DNS.Query != probe.DefaultDNSQuery || !wired.DNS.Only || wired.Node != "n1" {
		t.Errorf("the endpoint in the plan: %+v", wired)
	}
	// No DNS configured: the Service is an opted-in one like any other.
	l.dns = dnsService{}
	for _, p := range l.snapshot() {
		if p.DNS != "" || p.Name == "kube-system/coredns-a" {
			t.Errorf("without a cluster DNS configured: %+v", p)
		}
	}
}

// A DNS Service without a UDP port is asked on 53; one whose dns port has
// another name, on its first UDP port.
func TestDNSPort(t *testing.T) {
	t.Parallel()
	if p := dnsPort(service("kube-system", "dns", clusterIP("198.51.100.10"))); p.Port != 53 {
		t.Errorf("no UDP port: %d", p.Port)
	}
	s := service("kube-system", "dns", func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "web", Port: 80, Protocol: corev1.ProtocolTCP}, {Name: "domain", Port: 1053, Protocol: corev1.ProtocolUDP}}
	})
	if p := dnsPort(s); p.Port != 1053 || p.Name != "domain" {
		t.Errorf("first UDP port: %+v", p)
	}
}

// The matrix's defaults ask kube-system/kube-dns; none asks nothing.
func TestMatrixConfigDNS(t *testing.T) {
	t.Parallel()
	k := &config.Kubernetes{}
	k.SetDefaults()
	if c := MatrixConfig(k); c.DNSNamespace != "kube-system" || c.DNSService != "kube-dns" || c.DNSQuery != probe.DefaultDNSQuery {
		t.Errorf("defaults: %+v", c)
	}
	k.DNS.Service = config.DNSServiceNone
	if c := MatrixConfig(k); c.DNSService != "" {
		t.Errorf("none: %+v", c)
	}
}
