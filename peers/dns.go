package peers

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	listersv1 "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// dnsService is the cluster DNS every agent asks, the one Service every
// pod's first packet goes through: its VIP as an lb peer, and each of
// its ready endpoints as a pod peer no agent runs on, so that the
// matrix's LB rule compares the VIP with its endpoints' direct paths
// (seed 002's failure, on the Service every pod uses) and a lossy
// endpoint is a target of its own.
type dnsService struct {
	namespace, name, query string
}

// Endpoints are asked over DNS alone (DNSOnly): the paths to their nodes
// are every agent's already, and tcp_syn's flows to each endpoint from
// every agent would add 8 probes an interval each for little.

// defaultDNSPort is where a DNS Service without a UDP port is asked.
const defaultDNSPort = 53

func (d dnsService) is(s *corev1.Service) bool {
	return d.name != "" && s.Namespace == d.namespace && s.Name == d.name
}

// peers are the DNS's VIP (Name "" when the Service is missing or has
// no cluster IP) and its endpoints, named namespace/pod (namespace/name@IP
// for an endpoint that is no pod). An endpoint on an address that is
// already a peer (known: a DNS on its node's host network) is left out:
// the node's peer is probed already, and one address is one target.
func (d dnsService) peers(services listersv1.ServiceLister, sl discoverylisters.EndpointSliceLister, nodes map[string]*corev1.Node,
	known map[netip.Addr]string, rackLabel string) (vip Peer, endpoints []Peer) {
	if d.name == "" {
		return Peer{}, nil
	}
	s, err := services.Services(d.namespace).Get(d.name)
	if err != nil {
		return Peer{}, nil
	}
	port := dnsPort(s)
	if addr, addr6 := clusterIPs(s); addr.IsValid() {
		vip = Peer{Name: s.Namespace + "/" + s.Name, Class: ClassLB, Addr: addr, Addr6: addr6, Port: uint16(port.Port),
			HTTP2: HTTP2{Mode: HTTP2None}, DNS: d.query}
	}
	if sl == nil {
		return vip, nil
	}
	list, _ := sl.EndpointSlices(d.namespace).List(labels.SelectorFromSet(labels.Set{ServiceNameLabel: d.name}))
	type endpoint struct {
		ips  []string
		node string
		port uint16
	}
	byName := map[string]*endpoint{}
	for _, es := range list {
		if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		epPort := endpointPort(es, port)
		for _, ep := range es.Endpoints {
			if !endpointReady(ep.Conditions) || len(ep.Addresses) == 0 {
				continue
			}
			name := d.namespace + "/"
			if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && ep.TargetRef.Name != "" {
				name += ep.TargetRef.Name
			} else {
				name += d.name + "@" + ep.Addresses[0]
			}
			e := byName[name]
			if e == nil {
				e = &endpoint{port: epPort}
				byName[name] = e
			}
			e.ips = append(e.ips, ep.Addresses...)
			if ep.NodeName != nil {
				e.node = *ep.NodeName
			}
		}
	}
	for _, name := range sortedNames(byName) {
		e := byName[name]
		addr, addr6 := dualStack(e.ips)
		if !addr.IsValid() || known[addr] != "" || addr6.IsValid() && known[addr6] != "" {
			continue
		}
		p := Peer{Name: name, Class: ClassPod, Addr: addr, Addr6: addr6, Port: e.port, HTTP2: HTTP2{Mode: HTTP2None}, DNS: d.query, DNSOnly: true}
		if n := nodes[e.node]; n != nil {
			p.Labels = topology(n, rackLabel)
		} else if e.node != "" {
			p.Labels = map[string]string{LabelNode: e.node}
		}
		endpoints = append(endpoints, p)
	}
	return vip, endpoints
}

// dnsPort is the Service's DNS port: the UDP port named dns (CoreDNS's
// and kube-dns's), else its first UDP port, else 53.
func dnsPort(s *corev1.Service) corev1.ServicePort {
	var first *corev1.ServicePort
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		if p.Protocol != corev1.ProtocolUDP {
			continue
		}
		if p.Name == "dns" {
			return *p
		}
		if first == nil {
			first = p
		}
	}
	if first != nil {
		return *first
	}
	return corev1.ServicePort{Port: defaultDNSPort, Protocol: corev1.ProtocolUDP}
}

// endpointPort is where a slice's endpoints serve the Service's DNS port
// (a slice's ports carry the Service ports' names), else that port's
// own number: the endpoints of a Service without a selector may list
// none.
func endpointPort(es *discoveryv1.EndpointSlice, svc corev1.ServicePort) uint16 {
	for _, p := range es.Ports {
		if p.Port == nil || *p.Port <= 0 || *p.Port > 65535 {
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if name == svc.Name && proto == corev1.ProtocolUDP {
			return uint16(*p.Port)
		}
	}
	return uint16(svc.Port)
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
