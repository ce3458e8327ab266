package agent

import (
	"fmt"
	"net/netip"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/probe"
)

// dnsFlows is how many fixed 5-tuples a DNS target is asked over, per
// transport. Fewer than tcp_syn's flows: every agent asks the cluster's
// DNS (the VIP and each endpoint), and its queries must stay a small
// share of what the DNS serves (2 agents a node x 3 targets x 2
// transports x 2 flows: 24 queries an interval per node, far fewer under
// the probe-rate cap), while two flows a transport still tell one lossy
// ECMP path from a lossy server.
const dnsFlows = 2

// reportedAs is the protocols a configured protocol is probed and
// reported as (api.ReportedAs).
func reportedAs(configured probe.Protocol) []probe.Protocol {
	names := api.ReportedAs(string(configured))
	out := make([]probe.Protocol, len(names))
	for i, n := range names {
		out[i] = probe.Protocol(n)
	}
	return out
}

// openDNS opens t's DNS flows, dnsFlows over UDP and as many over TCP,
// from its family's source.
func openDNS(t *target) (map[probe.Protocol][]*probe.DNSFlow, error) {
	out := map[probe.Protocol][]*probe.DNSFlow{}
	server := netip.AddrPortFrom(t.Addr, t.Port)
	for _, proto := range []probe.Protocol{probe.ProtocolDNSUDP, probe.ProtocolDNSTCP} {
		for range dnsFlows {
			f, err := probe.NewDNSFlow(probe.DNSConfig{Source: t.eng.src, Server: server, Query: t.DNS, TCP: proto == probe.ProtocolDNSTCP})
			if err != nil {
				closeDNS(out)
				return nil, fmt.Errorf("target %s: %w", t.Name, err)
			}
			out[proto] = append(out[proto], f)
		}
	}
	return out, nil
}

// closeDNS closes every flow of flows, ending their probes in flight.
func closeDNS(flows map[probe.Protocol][]*probe.DNSFlow) {
	for _, fs := range flows {
		for _, f := range fs {
			f.Close()
		}
	}
}
