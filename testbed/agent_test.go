package testbed

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/api"
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

// TestAgentConfigFamilies checks each family mode: an IPv4 host stays
// IPv4 whatever is asked, a dual-stack host sends from and probes both
// families (AgentConfig's default), and an IPv6-only fabric's agent
// sends from and probes IPv6 alone; every rendering loads.
func TestAgentConfigFamilies(t *testing.T) {
	t.Parallel()
	// RFC 3849 documentation addresses: nothing is dialled.
	dual := func(h lab.Host, a6 string) lab.Host {
		h.Addr6 = netip.MustParseAddr(a6)
		return h
	}
	d11, d21 := dual(n11, "2001:db8:0:1::11"), dual(n21, "2001:db8:0:2::11")
	cases := []struct {
		name         string
		cfg          *config.Agent
		source       string
		listen       string
		wantAddrs    []string
		wantFirstSrc string
	}{
		{"ipv4 host, every family", AgentConfig(n11, config.Probing{}, n21), "", "192.0.2.11:9808", []string{"192.0.2.21"}, "192.0.2.11"},
		{"ipv4 host, ipv6 asked", agentConfig(n11, []string{api.FamilyIPv4, api.FamilyIPv6}, config.Probing{}, d21), "", "192.0.2.11:9808", []string{"192.0.2.21"}, "192.0.2.11"},
		{"dual-stack", AgentConfig(d11, config.Probing{}, d21, n21p1), "192.0.2.11,2001:db8:0:1::11", "0.0.0.0:9808",
			[]string{"192.0.2.21", "2001:db8:0:2::11", "192.0.2.117"}, "192.0.2.11"},
		{"dual-stack host, ipv4 only", agentConfig(d11, []string{api.FamilyIPv4}, config.Probing{}, d21), "", "192.0.2.11:9808", []string{"192.0.2.21"}, "192.0.2.11"},
		{"ipv6 only", agentConfig(d11, []string{api.FamilyIPv6}, config.Probing{}, d21, n21p1), "2001:db8:0:1::11", "0.0.0.0:9808",
			[]string{"2001:db8:0:2::11"}, "2001:db8:0:1::11"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := tc.cfg
			var addrs []string
			for _, tg := range c.Targets {
				addrs = append(addrs, tg.Address)
			}
			if c.Source != tc.source || c.Listen != tc.listen || !reflect.DeepEqual(addrs, tc.wantAddrs) {
				t.Errorf("got source %q listen %q targets %v, want %q %q %v", c.Source, c.Listen, addrs, tc.source, tc.listen, tc.wantAddrs)
			}
			path, err := WriteConfig(t.TempDir(), c.Name, c)
			if err != nil {
				t.Fatal(err)
			}
			got, err := config.LoadAgent(path)
			if err != nil {
				t.Fatalf("the agent refuses the rendered config: %v", err)
			}
			if src := got.SourceAddr().String(); src != tc.wantFirstSrc {
				t.Errorf("first source %s, want %s: where the harness and the matrix reach the agent", src, tc.wantFirstSrc)
			}
		})
	}
}

func TestFabricSpecFamilies(t *testing.T) {
	t.Parallel()
	v4, dual := lab.DefaultSpec(), lab.DefaultSpec()
	dual.IPv6 = true
	cases := []struct {
		name    string
		spec    FabricSpec
		want    []string
		wantErr []string // substrings of the error; none for no error
	}{
		{"ipv4 lab", FabricSpec{Lab: v4}, []string{"ipv4"}, nil},
		{"dual-stack lab", FabricSpec{Lab: dual}, []string{"ipv4", "ipv6"}, nil},
		{"ipv6 only", FabricSpec{Lab: dual, Families: []string{"ipv6"}}, []string{"ipv6"}, nil},
		{"ipv6 on an ipv4 lab", FabricSpec{Lab: v4, Families: []string{"ipv6"}}, nil, []string{`families[0]: "ipv6" needs a lab with IPv6`}},
		{"unknown and twice", FabricSpec{Lab: dual, Families: []string{"ipv5", "ipv4", "ipv4"}}, nil, []string{`families[0]: "ipv5" not one of ipv4, ipv6`, `families[2]: "ipv4" twice`}},
		{"empty", FabricSpec{Lab: dual, Families: []string{}}, nil, []string{"families: empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.spec.checkFamilies()
			if tc.wantErr != nil {
				for _, w := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("got error %v, want one with %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.spec.families(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("families %v, want %v", got, tc.want)
			}
		})
	}
}
