package testbed

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/netprober/prober/config"
	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/probe"
)

// Hosts numbered like lab's (n11 is 198.19.1.11), in RFC 5737 space: the
// test dials nothing.
var (
	n11   = lab.Host{Name: "n11", Addr: netip.MustParseAddr("192.0.2.11"), Rack: "r1", Zone: "z1", Node: "n11", Class: lab.ClassNode}
	n21   = lab.Host{Name: "n21", Addr: netip.MustParseAddr("192.0.2.21"), Rack: "r2", Zone: "z2", Node: "n21", Class: lab.ClassNode}
	n21p1 = lab.Host{Name: "n21p1", Addr: netip.MustParseAddr("192.0.2.117"), Rack: "r2", Zone: "z2", Node: "n21", Class: lab.ClassPod}
)

// TestAgentConfigLoads checks that what StartAgent writes is what `prober
// agent` reads: AgentConfig's result, written by WriteConfig, loads
// strictly and validates, zero schedule fields take the agent's defaults,
// and the targets keep their classes, labels and HTTP/2 modes.
func TestAgentConfigLoads(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		cfg     *config.Agent
		wantP   func(p config.Probing) bool
		targets []config.Target
	}{
		{
			name: "defaults",
			cfg:  AgentConfig(n11, config.Probing{}, n21),
			wantP: func(p config.Probing) bool {
				return p.Interval.D() == config.DefaultInterval && p.Flows == config.DefaultFlows && p.Trace.BudgetPerMinute == config.DefaultTraceBudgetPerMinute
			},
			targets: []config.Target{{Name: "n21", Address: "192.0.2.21", Class: "node", Port: AgentPort,
				Labels: map[string]string{"zone": "z2", "node": "n21"}, HTTP2: config.HTTP2H2C}},
		},
		{
			name: "a pod with a schedule and the VIP",
			cfg: func() *config.Agent {
				c := AgentConfig(n21p1, config.Probing{Interval: config.Duration(100 * time.Millisecond), Flows: 4,
					Protocols: []probe.Protocol{probe.ProtocolTCPSYN, probe.ProtocolHTTP2Ping}, Trace: config.TraceProbing{BudgetPerMinute: 600}}, n11)
				c.Targets = append(c.Targets, VIPTarget(netip.MustParseAddr("192.0.2.250")))
				return c
			}(),
			wantP: func(p config.Probing) bool {
				return p.Interval.D() == 100*time.Millisecond && p.Timeout.D() == config.DefaultTimeout && p.Flows == 4 &&
					len(p.Protocols) == 2 && p.Trace.BudgetPerMinute == 600
			},
			targets: []config.Target{
				{Name: "n11", Address: "192.0.2.11", Class: "node", Port: AgentPort, Labels: map[string]string{"zone": "z1", "node": "n11"}, HTTP2: config.HTTP2H2C},
				{Name: "vip", Address: "192.0.2.250", Class: "lb", Port: AgentPort, HTTP2: config.HTTP2H2C},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path, err := WriteConfig(t.TempDir(), tc.cfg.Name, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := config.LoadAgent(path)
			if err != nil {
				t.Fatalf("the agent refuses the rendered config: %v", err)
			}
			if got.Name != tc.cfg.Name || got.Class != tc.cfg.Class || got.Listen != tc.cfg.Listen || got.Labels["node"] != tc.cfg.Labels["node"] {
				t.Errorf("identity: got %s %s %s %v, want %s %s %s %v", got.Name, got.Class, got.Listen, got.Labels, tc.cfg.Name, tc.cfg.Class, tc.cfg.Listen, tc.cfg.Labels)
			}
			if !tc.wantP(got.Probing) {
				t.Errorf("probing: got %+v", got.Probing)
			}
			if !reflect.DeepEqual(got.Targets, tc.targets) {
				t.Errorf("targets:\n got %+v\nwant %+v", got.Targets, tc.targets)
			}
		})
	}
}

func TestAgentConfigIdentity(t *testing.T) {
	t.Parallel()
	c := AgentConfig(n21p1, config.Probing{})
	if c.Name != "n21p1" || c.Class != config.ClassPod || c.Listen != "192.0.2.117:9808" || c.Log != "json" || len(c.Targets) != 0 {
		t.Errorf("got %+v", c)
	}
	want := map[string]string{"zone": "z2", "node": "n21"}
	if !reflect.DeepEqual(c.Labels, want) {
		t.Errorf("labels %v, want %v", c.Labels, want)
	}
}
