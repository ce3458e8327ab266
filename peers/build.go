package peers

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// nodePeer is the peer of a Node with an IPv4 InternalIP whose kubelet is
// Ready, or silent. A silent kubelet (Ready Unknown: no status for the
// node monitor's grace period) is what a network partition looks like
// from the API server: in seeds 000 and 001 whole zones and then every
// node went NotReady this way. Such a node stays a peer, labelled
// ready=unknown, so that its loss shows in the matrix rather than
// vanishing with it; a node that is merely down shows as a host suspect,
// which is what it is. A kubelet that reports NotReady (False) is alive
// and reaching the API server, and the node's trouble is its own (its
// runtime, its CNI, a drain): it leaves, as a deleted Node does, so that
// it is not counted as network loss.
func nodePeer(n *corev1.Node, rackLabel string, port uint16) (Peer, bool) {
	ready := nodeReady(n)
	if n.DeletionTimestamp != nil || (ready != corev1.ConditionTrue && ready != corev1.ConditionUnknown) {
		return Peer{}, false
	}
	addr, ok := internalIP(n)
	if !ok {
		return Peer{}, false
	}
	labels := topology(n, rackLabel)
	if ready == corev1.ConditionUnknown {
		labels[LabelReady] = "unknown"
	}
	return Peer{
		Name: n.Name, Class: ClassNode, Addr: addr, Port: port,
		Labels:        labels,
		Unschedulable: n.Spec.Unschedulable,
	}, true
}

// podPeer is the peer of a Running, Ready agent Pod with an IPv4 PodIP
// that is not terminating, on a Node the cache has. A terminating or
// NotReady pod leaves at once, so its going away is never counted as
// loss. node is the pod's Node (nil when the cache has none), for the
// zone and rack labels.
func podPeer(p *corev1.Pod, node *corev1.Node, rackLabel string, port uint16) (Peer, bool) {
	if !podServing(p) {
		return Peer{}, false
	}
	addr, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil || !addr.Is4() {
		return Peer{}, false
	}
	// A pod whose Node is gone (deleted, or being deleted) went with
	// its machine: the API server keeps it Running and Ready until the
	// pod garbage collector deletes it, some 40 s on, while its address
	// answers nothing. Dropping it with its Node keeps a decommissioned
	// node's pod from being counted as loss.
	if node == nil || node.DeletionTimestamp != nil {
		return Peer{}, false
	}
	return Peer{Name: p.Name, Class: ClassPod, Addr: addr, Port: port, Labels: topology(node, rackLabel), Agent: true, AgentPod: p.Name}, true
}

// podServing: Running, Ready, scheduled, not being deleted.
func podServing(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeReady is the status of the Node's Ready condition, "" without one
// (a Node whose kubelet has not reported yet).
func nodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// internalIP is the Node's first IPv4 InternalIP: the agents probe over
// IPv4 only for now.
func internalIP(n *corev1.Node) (netip.Addr, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

func topology(n *corev1.Node, rackLabel string) map[string]string {
	l := map[string]string{LabelNode: n.Name}
	if z := n.Labels[ZoneLabel]; z != "" {
		l[LabelZone] = z
	}
	if rackLabel != "" {
		if r := n.Labels[rackLabel]; r != "" {
			l[LabelRack] = r
		}
	}
	return l
}

// apiServerPeer is the kubernetes Service in default: its ClusterIP on the
// https port, the path every pod's API calls take through kube-proxy. h2
// is how it is pinged (Config.APIServerHTTP2).
func apiServerPeer(s *corev1.Service, h2 HTTP2) (Peer, bool) {
	addr, ok := clusterIPv4(s)
	if !ok {
		return Peer{}, false
	}
	port := uint16(443)
	for _, p := range s.Spec.Ports {
		if p.Name == "https" {
			port = uint16(p.Port)
		}
	}
	return Peer{Name: s.Namespace + "/" + s.Name, Class: ClassLB, Addr: addr, Port: port, HTTP2: h2}, true
}

// servicePeers are the lb peers of a Service annotated
// prober.netprober.io/probe: "true", of any type, each on the Service's
// first TCP port: its IPv4 ClusterIP, named namespace/name (a headless or
// ExternalName Service has none), and the IPv4 ingress IPs of a
// LoadBalancer, named namespace/name@IP (hostname-only ingresses, as some
// clouds give, have no IP to probe). badHTTP2 is the value of an
// unusable prober.netprober.io/http2 annotation, which leaves the Service
// unpinged.
func servicePeers(s *corev1.Service) (out []Peer, badHTTP2 string) {
	if s.Annotations[ProbeAnnotation] != "true" {
		return nil, ""
	}
	var port uint16
	for _, p := range s.Spec.Ports {
		if p.Protocol == corev1.ProtocolTCP || p.Protocol == "" {
			port = uint16(p.Port)
			break
		}
	}
	if port == 0 {
		return nil, ""
	}
	h2 := HTTP2{Mode: HTTP2None}
	switch v := s.Annotations[HTTP2Annotation]; v {
	case "", HTTP2None:
	case HTTP2H2C:
		h2.Mode = HTTP2H2C
	case HTTP2TLS:
		// TLS to a Service whose CA and name discovery cannot know:
		// unverified. The agent sends nothing but the HTTP/2 preface,
		// SETTINGS and PINGs, no request and no credential; a PING
		// measures the established flow, not the server's identity.
		h2 = HTTP2{Mode: HTTP2TLS, InsecureSkipVerify: true}
	default:
		badHTTP2 = v
	}
	name := s.Namespace + "/" + s.Name
	if addr, ok := clusterIPv4(s); ok {
		out = append(out, Peer{Name: name, Class: ClassLB, Addr: addr, Port: port, HTTP2: h2})
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range s.Status.LoadBalancer.Ingress {
			addr, err := netip.ParseAddr(in.IP)
			if err != nil || !addr.Is4() {
				continue
			}
			out = append(out, Peer{Name: name + "@" + addr.String(), Class: ClassLB, Addr: addr, Port: port, HTTP2: h2})
		}
	}
	return out, badHTTP2
}

// clusterIPv4 is the Service's IPv4 cluster IP (the first, on a
// dual-stack Service); none for a headless ("None") or ExternalName one.
func clusterIPv4(s *corev1.Service) (netip.Addr, bool) {
	ips := s.Spec.ClusterIPs
	if len(ips) == 0 {
		ips = []string{s.Spec.ClusterIP}
	}
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil && a.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
}
