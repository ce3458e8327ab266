package matrixsim

import (
	"fmt"
	"math/rand/v2"

	"github.com/netprober/prober/api"
)

// The cluster DNS (Config.DNS): a Service whose VIP kube-proxy DNATs on
// the source's node to one of two CoreDNS pods, each of them asked
// directly too, as discovery plans them (peers/dns.go): by every agent,
// over dns_udp and dns_tcp, 2 untraced flows a transport.
const (
	// DNSServiceName is the DNS VIP's target name.
	DNSServiceName = "kube-system/kube-dns"
	dnsVIP         = "198.19.251.53"
	dnsFlows       = 2
	dnsPort        = 53
	dnsAddrID      = 1 << 21
	dnsVIPDst      = -3 // target numbers: the VIP, then each endpoint
	dnsEndpointDst = -4
	dnsEndpoints   = 2
)

// The DNS faults.
const (
	// DNSEndpointLoss: CoreDNS endpoint Node (0 or 1) drops Loss of the
	// lookups over UDP that reach it (a filter on UDP/53, a pod's
	// overloaded socket), direct or through the VIP; TCP and everything
	// else pass.
	DNSEndpointLoss Kind = "dns_endpoint"
	// DNSNoEndpoints: the DNS Service lost its endpoints (seed 002 on
	// the Service every pod uses): kube-proxy rejects every lookup to
	// the VIP, and discovery plans no endpoint to ask.
	DNSNoEndpoints Kind = "dns_service"
)

// DNSEndpointName is the target name of CoreDNS endpoint i.
func DNSEndpointName(i int) string { return fmt.Sprintf("kube-system/coredns-%d", i+1) }

// dnsNode is the node CoreDNS endpoint i runs on: the first node of the
// first two racks (the first two nodes of a one-rack fabric).
func (f *Fabric) dnsNode(i int) int {
	if f.cfg.Racks > 1 {
		return i * f.cfg.NodesPerRack
	}
	return min(i, f.cfg.NodesPerRack-1)
}

func (f *Fabric) dnsAddr(i int) string {
	n := f.dnsNode(i)
	r, k := n/f.cfg.NodesPerRack, n%f.cfg.NodesPerRack
	return fmt.Sprintf("198.18.%d.%d", 128+r, 16*(k+1)+3)
}

// dnsTargets are the DNS target numbers every agent probes under fault
// ft: none without Config.DNS, the VIP alone when it has no endpoints.
func (f *Fabric) dnsTargets(ft Fault) []int {
	if !f.cfg.DNS {
		return nil
	}
	out := []int{dnsVIPDst}
	if ft.Kind != DNSNoEndpoints {
		for i := range dnsEndpoints {
			out = append(out, dnsEndpointDst-i)
		}
	}
	return out
}

func isDNSDst(dst int) bool { return dst <= dnsVIPDst }

// dnsTarget is src's report on DNS target dst: the VIP or an endpoint,
// over UDP and TCP, counts only (DNS flows are not traced).
func (f *Fabric) dnsTarget(src, dst int, ft Fault, x faults, rng *rand.Rand) api.Target {
	cfg := f.cfg
	from := "node"
	if f.isPod(src) {
		from = "pod"
	}
	t := api.Target{Port: dnsPort}
	if dst == dnsVIPDst {
		t.Name, t.Address, t.Class, t.Path = DNSServiceName, dnsVIP, "lb", from+"_to_lb"
		if ft.Kind != DNSNoEndpoints {
			for i := range dnsEndpoints {
				t.Backends = append(t.Backends, DNSEndpointName(i))
			}
		}
	} else {
		i := dnsEndpointDst - dst
		node := f.dnsNode(i)
		t.Name, t.Address, t.Class, t.Path = DNSEndpointName(i), f.dnsAddr(i), "pod", from+"_to_pod"
		t.Labels = map[string]string{"node": f.nodeName[node]}
		for k, v := range f.rackLabels[node/cfg.NodesPerRack] {
			t.Labels[k] = v
		}
	}
	ra := f.nodeOf(src) / cfg.NodesPerRack
	for _, proto := range []string{api.ProtocolDNSUDP, api.ProtocolDNSTCP} {
		p := api.Protocol{Protocol: proto}
		for fl := range dnsFlows {
			sport := uint64(40000 + fl*11)
			if proto == api.ProtocolDNSTCP {
				sport += 5
			}
			for probe := range cfg.ProbesPerFlow {
				p.Sent++
				if dst == dnsVIPDst && ft.Kind == DNSNoEndpoints {
					p.Lost++ // rejected by kube-proxy: loss for an lb target
					continue
				}
				// The endpoint: the target itself, or the one the
				// source's kube-proxy picks, per UDP flow (conntrack
				// keeps it) or per TCP connection.
				i := dnsEndpointDst - dst
				if dst == dnsVIPDst {
					pick := sport
					if proto == api.ProtocolDNSTCP {
						pick ^= uint64(probe+1) << 20
					}
					i = int(hash(uint64(src), dnsAddrID, pick, dnsPort, 4242) % dnsEndpoints)
				}
				peer := len(f.nodeName) + f.dnsNode(i) // its node's pod forwarding
				dstID := uint64(dnsAddrID + i)
				rb := f.dnsNode(i) / cfg.NodesPerRack
				w := f.wayOf(uint64(src), dstID, sport, dnsPort, uint64(ra), ra, rb)
				fwd, hole := f.oneWay(src, peer, w, &x, hash(uint64(src), dstID, sport, dnsPort, 999))
				ok := f.roundTrip(fwd, hole, src, peer, sport, dstID, 0, &x)
				if proto == api.ProtocolDNSUDP {
					ok *= 1 - x.dnsEndpoint[i]
				}
				if rng.Float64() >= ok {
					p.Lost++
				}
			}
		}
		p.LossRatio = float64(p.Lost) / float64(p.Sent)
		t.Protocols = append(t.Protocols, p)
	}
	return t
}
