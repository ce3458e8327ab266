package agent

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/probe"
)

// TestConfigFrom: the runtime config built from a representative file is
// the one expected, field by field: durations, parsed sources, the
// listen addresses, the probe engines' configs and the static targets
// converted as a plan's. Probe's own defaults (a trace's rate, retry gap)
// come from probe; everything the file or config decides is spelled out.
// RFC 5737 and RFC 3849 addresses: nothing is dialled.
func TestConfigFrom(t *testing.T) {
	t.Parallel()
	const ca = "../config/testdata/tls/cert.pem"
	addr := netip.MustParseAddr
	trace := func(maxTTL, probes int, timeout time.Duration) probe.TraceConfig {
		tc := probe.TraceConfig{MaxTTL: maxTTL, Probes: probes, Timeout: timeout, Concurrency: 1}
		tc.SetDefaults()
		return tc
	}
	for _, tc := range []struct {
		name string
		yaml string
		want Config
	}{
		{
			name: "static, every field",
			yaml: `
name: n11
class: node
listen: 192.0.2.11:9808
source: 192.0.2.11,2001:db8::11
labels: {rack: r1}
tls: {selfSigned: true, hosts: [n11]}
probing:
  interval: 500ms
  timeout: 2s
  window: 30s
  flows: 4
  protocols: [icmp, tcp_syn, http2_ping, dns]
  maxProbesPerSecond: 100
  maxTargets: 10
  sourcePortBase: 62000
  http2: {deadAfter: 5}
  trace: {interval: 1m, budgetPerMinute: 12, maxTTL: 20, probes: 2}
  pmtu: {every: 10, size: 1400}
metrics: {perTarget: false}
targets:
  - {name: n21, address: 192.0.2.21, class: node, labels: {rack: r2}}
  - {name: n21, address: "2001:db8::21", class: node, http2: none}
  - {name: api-vip, address: 198.51.100.10, class: lb, port: 6443, caFile: ` + ca + `, serverName: kubernetes.default.svc}
  - {name: dns, address: 198.51.100.53, class: lb, dns: {only: true}}
`,
			want: Config{
				Name: "n11", Class: api.ClassNode, Labels: map[string]string{"rack": "r1"},
				Sources:   []netip.Addr{addr("192.0.2.11"), addr("2001:db8::11")},
				Listen:    []string{"192.0.2.11:9808"},
				Server:    probe.ResponderConfig{Listen: "192.0.2.11:9808", TLS: &probe.ResponderTLS{Hosts: []string{"n11"}}},
				Protocols: []probe.Protocol{probe.ProtocolICMP, probe.ProtocolTCPSYN, probe.ProtocolHTTP2Ping, probe.ProtocolDNS},
				Interval:  500 * time.Millisecond, Timeout: 2 * time.Second, Window: 30 * time.Second,
				Flows: 4, MaxProbesPerSecond: 100, MaxTargets: 10, PerTarget: false,
				TCPSYN: probe.TCPSYNConfig{PortBase: 62000, Ports: 40, Sized: true},
				// Redials back off from an interval to ten.
				HTTP2:   probe.HTTP2Config{Timeout: 2 * time.Second, DeadAfter: 5, MinBackoff: 500 * time.Millisecond, MaxBackoff: 5 * time.Second},
				Tracing: Tracing{On: true, Interval: time.Minute, BudgetPerMinute: 12, Trace: trace(20, 2, 2*time.Second)},
				PMTU:    PMTU{Every: 10, Size: 1400},
				Targets: []Target{
					{Name: "n21", Addr: addr("192.0.2.21"), Class: api.ClassNode, Port: config.DefaultPort, Labels: map[string]string{"rack": "r2"}, HTTP2: HTTP2{Mode: api.HTTP2H2C}},
					{Name: "n21", Addr: addr("2001:db8::21"), Class: api.ClassNode, Port: config.DefaultPort, HTTP2: HTTP2{Mode: api.HTTP2None}},
					{Name: "api-vip", Addr: addr("198.51.100.10"), Class: api.ClassLB, Port: 6443,
						HTTP2: HTTP2{Mode: api.HTTP2TLS, CAFile: ca, ServerName: "kubernetes.default.svc"}},
					{Name: "dns", Addr: addr("198.51.100.53"), Class: api.ClassLB, Port: config.DefaultDNSPort, HTTP2: HTTP2{Mode: api.HTTP2TLS},
						DNS: probe.DefaultDNSQuery, DNSOnly: true},
				},
			},
		},
		{
			name: "planned node agent, defaults",
			yaml: `
class: node
listen: 0.0.0.0:9808
source: 192.0.2.11
discovery: kubernetes
kubernetes: {matrix: "http://192.0.2.5:9809"}
`,
			want: Config{
				Class:   api.ClassNode,
				Sources: []netip.Addr{addr("192.0.2.11")},
				// Its node's address and loopback, not every interface.
				Listen:    []string{"192.0.2.11:9808", "127.0.0.1:9808"},
				Server:    probe.ResponderConfig{Listen: "0.0.0.0:9808"},
				Planned:   true,
				Protocols: []probe.Protocol{probe.ProtocolICMP, probe.ProtocolTCPSYN},
				Interval:  config.DefaultInterval, Timeout: config.DefaultTimeout, Window: config.DefaultWindow,
				Flows: config.DefaultFlows, MaxProbesPerSecond: config.DefaultMaxProbesPerSecond, MaxTargets: config.DefaultMaxTargets, PerTarget: true,
				TCPSYN: probe.TCPSYNConfig{PortBase: config.DefaultSourcePortBase, Ports: config.DefaultMaxTargets * config.DefaultFlows},
				HTTP2:  probe.HTTP2Config{Timeout: time.Second, DeadAfter: config.DefaultDeadAfter, MinBackoff: time.Second, MaxBackoff: 10 * time.Second},
				Tracing: Tracing{On: true, Interval: config.DefaultTraceInterval, BudgetPerMinute: config.DefaultTraceBudgetPerMinute,
					Trace: trace(probe.DefaultTraceMaxTTL, probe.DefaultTraceProbes, config.DefaultTimeout)},
				Targets: []Target{},
			},
		},
		{
			name: "pod agent, tracing off",
			yaml: `
name: p11
class: pod
listen: 192.0.2.12:9808
probing: {protocols: [tcp_syn], trace: {enabled: false}}
targets:
  - {name: p21, address: 192.0.2.22, class: pod, port: 9000}
`,
			want: Config{
				Name: "p11", Class: api.ClassPod,
				Sources:   []netip.Addr{addr("192.0.2.12")},
				Listen:    []string{"192.0.2.12:9808"},
				Server:    probe.ResponderConfig{Listen: "192.0.2.12:9808"},
				Protocols: []probe.Protocol{probe.ProtocolTCPSYN},
				Interval:  config.DefaultInterval, Timeout: config.DefaultTimeout, Window: config.DefaultWindow,
				Flows: config.DefaultFlows, MaxProbesPerSecond: config.DefaultMaxProbesPerSecond, MaxTargets: config.DefaultMaxTargets, PerTarget: true,
				TCPSYN: probe.TCPSYNConfig{PortBase: config.DefaultSourcePortBase, Ports: config.DefaultMaxTargets * config.DefaultFlows},
				HTTP2:  probe.HTTP2Config{Timeout: time.Second, DeadAfter: config.DefaultDeadAfter, MinBackoff: time.Second, MaxBackoff: 10 * time.Second},
				Tracing: Tracing{On: false, Interval: config.DefaultTraceInterval, BudgetPerMinute: config.DefaultTraceBudgetPerMinute,
					Trace: trace(probe.DefaultTraceMaxTTL, probe.DefaultTraceProbes, config.DefaultTimeout)},
				Targets: []Target{{Name: "p21", Addr: addr("192.0.2.22"), Class: api.ClassPod, Port: 9000, HTTP2: HTTP2{Mode: api.HTTP2H2C}}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file, err := config.ParseAgent("test.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ConfigFrom(file)
			if err != nil {
				t.Fatalf("ConfigFrom: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				g, w := reflect.ValueOf(got), reflect.ValueOf(tc.want)
				for i := range g.NumField() {
					if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
						t.Errorf("%s:\n got %+v\nwant %+v", g.Type().Field(i).Name, g.Field(i).Interface(), w.Field(i).Interface())
					}
				}
			}
			if err := Check(got); err != nil {
				t.Errorf("Check: %v", err)
			}
		})
	}
}

// TestConfigFromRefuses: a static target the plan's converter refuses
// (which config.Agent.Validate rejects first) fails ConfigFrom, naming
// it; the others are converted.
func TestConfigFromRefuses(t *testing.T) {
	t.Parallel()
	file := &config.Agent{Name: "n11", Class: api.ClassNode, Listen: "192.0.2.11:9808", Targets: []config.Target{
		{Name: "n21", Address: "192.0.2.21", Class: api.ClassNode},
		{Name: "any", Address: "0.0.0.0", Class: api.ClassNode},
		{Name: "h3", Address: "192.0.2.23", Class: api.ClassLB, HTTP2: "h3"},
	}}
	file.SetDefaults()
	got, err := ConfigFrom(file)
	if err == nil {
		t.Fatal("ConfigFrom accepted an unspecified address and http2: h3")
	}
	for _, want := range []string{`static target any: address "0.0.0.0"`, `static target h3: http2 mode "h3"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ConfigFrom: %v\nlacks %s", err, want)
		}
	}
	if len(got.Targets) != 1 || got.Targets[0].Name != "n21" {
		t.Errorf("targets %+v, want n21 alone", got.Targets)
	}
}
