package agent

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/probe/probetest"
)

// TestAgentDNS: a target with a dns: block is asked over UDP and TCP,
// each over dnsFlows fixed 5-tuples, reported as dns_udp and dns_tcp; an
// answer that is an error is counted by its reason and is no loss; a DNS
// VIP that refuses (a Service without endpoints) loses every lookup.
func TestAgentDNS(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	good := probetest.NewDNSServer(t, netip.AddrPortFrom(lo, 0))
	failing := probetest.NewDNSServer(t, netip.AddrPortFrom(lo, 0))
	failing.SetMode(probetest.DNSServFail)
	ln, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, 0)))
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.LocalAddr().(*net.UDPAddr).Port
	ln.Close()
	const settle = time.Second
	_, base := loopbackAgentWith(t, `
name: lo1
class: node
listen: 127.0.0.1:0
probing: {interval: 50ms, timeout: 300ms, window: 10s, protocols: [dns], maxTargets: 4}
targets:
  - {name: dns-vip, address: 127.0.0.1, class: lb, port: `+itoa(int(good.Addr.Port()))+`, http2: none, dns: {query: kubernetes.default.svc.cluster.local.}}
  - {name: coredns-a, address: 127.0.0.1, class: pod, port: `+itoa(int(failing.Addr.Port()))+`, http2: none, dns: {}}
  - {name: no-endpoints, address: 127.0.0.1, class: lb, port: `+itoa(closed)+`, http2: none, dns: {}}
`, func(a *Agent) { a.lbSettle = settle })
	stats := func() map[string]api.Stats {
		m := map[string]api.Stats{}
		for _, tg := range getObservations(t, base).Targets {
			for _, p := range tg.Protocols {
				m[tg.Name+"/"+p.Protocol] = p.Stats
			}
		}
		return m
	}
	keys := []string{"dns-vip/dns_udp", "dns-vip/dns_tcp", "coredns-a/dns_udp", "coredns-a/dns_tcp", "no-endpoints/dns_udp", "no-endpoints/dns_tcp"}
	var m map[string]api.Stats
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		m = stats()
		enough := len(m) == len(keys)
		for _, k := range keys {
			enough = enough && m[k].Sent >= 10
		}
		if enough {
			break
		}
	}
	if len(m) != len(keys) {
		t.Fatalf("reported %v, want exactly %v", m, keys)
	}
	for _, k := range keys {
		s := m[k]
		want := uint64(0)
		if strings.HasPrefix(k, "no-endpoints/") {
			want = s.Sent
		}
		if s.Sent < 10 || s.Lost != want {
			t.Errorf("%s: %+v, want 10+ sent and %d lost", k, s, want)
		}
	}
	for name, s := range map[string]*probetest.DNSServer{"dns-vip": good, "coredns-a": failing} {
		if u, c := s.UDPClients(), s.TCPClients(); len(u) != dnsFlows || len(c) != dnsFlows {
			t.Errorf("%s was asked from %d UDP and %d TCP 5-tuples, want %d each: %v %v", name, len(u), len(c), dnsFlows, u, c)
		}
	}
	metrics := get(t, base+"/metrics")
	promtoolCheck(t, metrics)
	for _, want := range []string{
		`prober_probes_sent_total{family="ipv4",path="node_to_lb",protocol="dns_udp",target="dns-vip"}`,
		`prober_probes_sent_total{family="ipv4",path="node_to_pod",protocol="dns_tcp",target="coredns-a"}`,
		`prober_probe_answer_errors_total{family="ipv4",path="node_to_pod",protocol="dns_udp",reason="servfail"}`,
		`prober_probe_answer_errors_total{family="ipv4",path="node_to_pod",protocol="dns_tcp",reason="servfail"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s:\n%s", want, grep(metrics, "dns"))
		}
	}
	if strings.Contains(metrics, `prober_probe_answer_errors_total{family="ipv4",path="node_to_lb"`) {
		t.Errorf("the answering VIP has answer errors:\n%s", grep(metrics, "answer_errors"))
	}
}

// TestAgentDNSOnly: a target asked over DNS alone (dns: {only: true}, as
// the matrix plans the cluster DNS's endpoints) gets no icmp, tcp_syn or
// http2_ping and takes no tcp_syn source port; one without only gets
// every protocol its class does.
func TestAgentDNSOnly(t *testing.T) {
	needRoot(t)
	lo := netip.MustParseAddr("127.0.0.1")
	s := probetest.NewDNSServer(t, netip.AddrPortFrom(lo, 0))
	port := itoa(int(s.Addr.Port()))
	a, base := loopbackAgent(t, `
name: lo1
class: node
listen: 127.0.0.1:0
probing: {interval: 50ms, timeout: 300ms, window: 10s, flows: 2, protocols: [icmp, tcp_syn, dns], sourcePortBase: 62200, maxTargets: 4}
targets:
  - {name: dns-vip, address: 127.0.0.1, class: lb, port: `+port+`, http2: none, dns: {}}
  - {name: coredns-a, address: 127.0.0.1, class: pod, port: `+port+`, dns: {only: true}}
`)
	var got map[string][]string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		got = map[string][]string{}
		for _, tg := range getObservations(t, base).Targets {
			for _, p := range tg.Protocols {
				got[tg.Name] = append(got[tg.Name], p.Protocol)
				if tg.Name == "coredns-a" && len(p.Flows) > 0 {
					t.Errorf("coredns-a/%s reports flows %+v", p.Protocol, p.Flows)
				}
			}
		}
		if len(got["dns-vip"]) == 3 && len(got["coredns-a"]) == 2 {
			break
		}
	}
	if want := []string{"tcp_syn", "dns_udp", "dns_tcp"}; !slices.Equal(got["dns-vip"], want) {
		t.Errorf("dns-vip probed over %v, want %v", got["dns-vip"], want)
	}
	if want := []string{"dns_udp", "dns_tcp"}; !slices.Equal(got["coredns-a"], want) {
		t.Errorf("coredns-a probed over %v, want %v", got["coredns-a"], want)
	}
	a.mu.Lock()
	for k, tg := range a.targets {
		if k.name == "coredns-a" && (tg.ports != nil || tg.h2 != nil) {
			t.Errorf("coredns-a holds tcp_syn ports %v, http2 %v", tg.ports, tg.h2 != nil)
		}
	}
	a.mu.Unlock()
}
