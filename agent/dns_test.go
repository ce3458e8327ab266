package agent

import (
	"net"
	"net/netip"
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
