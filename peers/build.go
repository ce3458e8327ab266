package peers

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// nodePeer is the peer of a Node with an InternalIP whose kubelet is
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
	var ips []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ips = append(ips, a.Address)
		}
	}
	addr, addr6 := dualStack(ips)
	if !addr.IsValid() {
		return Peer{}, false
	}
	labels := topology(n, rackLabel)
	if ready == corev1.ConditionUnknown {
		labels[LabelReady] = "unknown"
	}
	return Peer{
		Name: n.Name, Class: ClassNode, Addr: addr, Addr6: addr6, Port: port,
		Labels:        labels,
		Unschedulable: n.Spec.Unschedulable,
	}, true
}

// podPeer is the peer of a Running, Ready agent Pod with a PodIP
// that is not terminating, on a Node the cache has. A terminating or
// NotReady pod leaves at once, so its going away is never counted as
// loss. node is the pod's Node (nil when the cache has none), for the
// zone and rack labels.
func podPeer(p *corev1.Pod, node *corev1.Node, rackLabel string, port uint16) (Peer, bool) {
	if !podServing(p) {
		return Peer{}, false
	}
	ips := []string{p.Status.PodIP}
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	addr, addr6 := dualStack(ips)
	if !addr.IsValid() {
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
	return Peer{Name: p.Name, Class: ClassPod, Addr: addr, Addr6: addr6, Port: port, Labels: topology(node, rackLabel), Agent: true, AgentPod: p.Name, AgentPodUID: string(p.UID)}, true
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

// dualStack picks a peer's addresses from ips (InternalIPs, pod IPs): the
// first IPv4 one as addr and the first IPv6 one as addr6 on a dual-stack
// peer; on an IPv6-only peer its first IPv6 address as addr. Unparsable,
// unspecified and link-local entries are skipped.
func dualStack(ips []string) (addr, addr6 netip.Addr) {
	var v4, v6 netip.Addr
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" || ip.IsUnspecified() || ip.IsLinkLocalUnicast() {
			continue
		}
		ip = ip.Unmap()
		if ip.Is4() && !v4.IsValid() {
			v4 = ip
		} else if ip.Is6() && !v6.IsValid() {
			v6 = ip
		}
	}
	if !v4.IsValid() {
		return v6, netip.Addr{}
	}
	return v4, v6
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
	addr, addr6 := clusterIPs(s)
	if !addr.IsValid() {
		return Peer{}, false
	}
	port := uint16(443)
	for _, p := range s.Spec.Ports {
		if p.Name == "https" {
			port = uint16(p.Port)
		}
	}
	return Peer{Name: s.Namespace + "/" + s.Name, Class: ClassLB, Addr: addr, Addr6: addr6, Port: port, HTTP2: h2}, true
}

// servicePeers are the lb peers of a Service annotated
// prober.netprober.io/probe: "true", of any type, each on the Service's
// first TCP port: its ClusterIPs (both families on a dual-stack Service),
// named namespace/name (a headless or ExternalName Service has none), and
// the ingress IPs of a
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
	if addr, addr6 := clusterIPs(s); addr.IsValid() {
		out = append(out, Peer{Name: name, Class: ClassLB, Addr: addr, Addr6: addr6, Port: port, HTTP2: h2})
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range s.Status.LoadBalancer.Ingress {
			addr, err := netip.ParseAddr(in.IP)
			if err != nil || addr.Zone() != "" || addr.IsUnspecified() {
				continue
			}
			addr = addr.Unmap()
			out = append(out, Peer{Name: name + "@" + addr.String(), Class: ClassLB, Addr: addr, Port: port, HTTP2: h2})
		}
	}
	return out, badHTTP2
}

// clusterIPs are the Service's cluster IPs, as dualStack picks them (a
// dual-stack Service has one per family); none for a headless ("None")
// or ExternalName one.
func clusterIPs(s *corev1.Service) (addr, addr6 netip.Addr) {
	ips := s.Spec.ClusterIPs
	if len(ips) == 0 {
		ips = []string{s.Spec.ClusterIP}
	}
	return dualStack(ips)
}
