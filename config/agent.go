package config

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/probe"
)

// Classes of endpoint: where a probe starts (node, pod) or ends (also lb).
const (
	ClassNode = api.ClassNode
	ClassPod  = api.ClassPod
	ClassLB   = api.ClassLB
)

// Agent is the configuration of `prober agent`.
type Agent struct {
	// Name is this agent's identity, its node name.
	Name string `json:"name"`
	// Class is where the probes originate: node or pod.
	Class string `json:"class"`
	// Listen is the address of /metrics, /healthz and /api/v1/observations.
	Listen string            `json:"listen"`
	Labels map[string]string `json:"labels,omitempty"`
	// Source is the address probes are sent from; the listen address's IP
	// by default. A dual-stack agent lists one address per family,
	// comma-separated ("198.18.1.11,2001:2:0:1::11"), as the downward
	// API's status.podIPs reads.
	Source  string   `json:"source,omitempty"`
	Probing Probing  `json:"probing"`
	Metrics Metrics  `json:"metrics"`
	Targets []Target `json:"targets"`
	// Discovery is where targets come from: static (default), the targets
	// list, or kubernetes, the cluster (then name and source default to
	// the downward API's NODE_NAME or POD_NAME, and POD_IP).
	Discovery  string      `json:"discovery,omitempty"`
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
	// Log selects the log format: json (default) or text.
	Log string `json:"log,omitempty"`
	// TLS, when set, makes the listen address serve TLS; see ServerTLS.
	TLS *ServerTLS `json:"tls,omitempty"`
}

// Probing holds the probe schedule.
type Probing struct {
	Interval Duration `json:"interval"`
	Timeout  Duration `json:"timeout"`
	Window   Duration `json:"window"`
	// Flows is the number of distinct, stable source ports per target for
	// tcp_syn.
	Flows     int              `json:"flows"`
	Protocols []probe.Protocol `json:"protocols"`
	// MaxProbesPerSecond bounds this agent's total probe rate.
	MaxProbesPerSecond float64 `json:"maxProbesPerSecond"`
	// MaxTargets caps the targets probed at once; the agent reserves
	// MaxTargets*Flows source ports for tcp_syn at start.
	MaxTargets int `json:"maxTargets,omitempty"`
	// SourcePortBase is where the reserved tcp_syn source ports start.
	// The default sits above Linux's ephemeral range (32768-60999) so the
	// kernel's own connections rarely want the same ports; ports in use are
	// skipped either way. See docs/agent.md.
	SourcePortBase int `json:"sourcePortBase,omitempty"`
	// HTTP2 configures http2_ping.
	HTTP2 HTTP2Probing `json:"http2"`
	// Trace configures the traceroutes of tcp_syn flows (config/trace.go).
	Trace TraceProbing `json:"trace"`
	// PMTU configures the path MTU probes of tcp_syn flows.
	PMTU PMTUProbing `json:"pmtu"`
}

// PMTUProbing sends one tcp_syn probe in Every of each flow padded to
// Size bytes of IP packet, Don't Fragment, over the flow's own 5-tuple,
// reported as tcp_syn_mtu: small probes that pass and large ones that
// vanish are a path MTU black hole. The probe budget is unchanged (the
// large probe replaces a small one). Size 0 is the MTU of the interface
// the route to each target leaves by. Every 0 is off.
type PMTUProbing struct {
	Every int `json:"every,omitempty"`
	Size  int `json:"size,omitempty"`
}

// Metrics configures the Prometheus exposition.
type Metrics struct {
	// PerTarget adds the target label to the per-target counters.
	PerTarget *bool `json:"perTarget,omitempty"`
}

// Target is a static peer.
type Target struct {
	Name    string            `json:"name"`
	Address string            `json:"address"`
	Class   string            `json:"class"`
	Port    int               `json:"port"`
	Labels  map[string]string `json:"labels,omitempty"`
	// HTTP2 is how http2_ping reaches the target: h2c, tls or none;
	// default api.DefaultHTTP2(class). CAFile (PEM), ServerName and
	// InsecureSkipVerify verify a tls target's certificate.
	HTTP2              string `json:"http2,omitempty"`
	CAFile             string `json:"caFile,omitempty"`
	ServerName         string `json:"serverName,omitempty"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify,omitempty"`
	// DNS, when set, makes dns probes ask the target on Port over UDP
	// and TCP; a target without it gets none.
	DNS *api.DNSQuestion `json:"dns,omitempty"`
}

// Defaults.
const (
	DefaultInterval           = time.Second
	DefaultTimeout            = time.Second
	DefaultWindow             = 60 * time.Second
	DefaultFlows              = 8
	DefaultMaxProbesPerSecond = 200
	DefaultPort               = 9808
	DefaultDNSPort            = 53 // a target with a dns: block
	DefaultSourcePortBase     = 61000
	DefaultMaxTargets         = 256
	// The matrix refuses reports beyond these (api/limits.go): an
	// agent's config must never let it send one.
	maxFlows       = api.MaxFlows
	maxSourcePorts = api.MaxReportTargets
	// maxPMTUEvery: rarer large probes would take many windows to see.
	maxPMTUEvery = 100
	// minPMTUSize is IPv4's minimum datagram every host accepts.
	minPMTUSize = 576
)

// LoadAgent reads, defaults and validates an agent configuration file.
// Every problem is reported, each prefixed with the file name.
func LoadAgent(path string) (*Agent, error) { return load[Agent](path) }

// ParseAgent is LoadAgent on bytes; name prefixes the error messages.
func ParseAgent(name string, b []byte) (*Agent, error) { return parse[Agent](name, b) }

// SetDefaults fills every unset field.
func (c *Agent) SetDefaults() {
	p := &c.Probing
	if p.Interval == 0 {
		p.Interval = Duration(DefaultInterval)
	}
	if p.Timeout == 0 {
		p.Timeout = Duration(DefaultTimeout)
	}
	if p.Window == 0 {
		p.Window = Duration(DefaultWindow)
	}
	if p.Flows == 0 {
		p.Flows = DefaultFlows
	}
	if len(p.Protocols) == 0 {
		p.Protocols = []probe.Protocol{probe.ProtocolICMP, probe.ProtocolTCPSYN}
	}
	if p.MaxProbesPerSecond == 0 {
		p.MaxProbesPerSecond = DefaultMaxProbesPerSecond
	}
	if p.MaxTargets == 0 {
		p.MaxTargets = DefaultMaxTargets
	}
	if p.SourcePortBase == 0 {
		p.SourcePortBase = DefaultSourcePortBase
	}
	if c.Metrics.PerTarget == nil {
		t := true
		c.Metrics.PerTarget = &t
	}
	if c.Log == "" {
		c.Log = "json"
	}
	if c.Discovery == "" {
		c.Discovery = DiscoveryStatic
	}
	if c.Discovery == DiscoveryKubernetes {
		if c.Kubernetes == nil {
			c.Kubernetes = &Kubernetes{}
		}
		c.Kubernetes.setAgentDefaults()
	}
	for i := range c.Targets {
		t := &c.Targets[i]
		switch {
		case t.Port != 0:
		case t.DNS != nil:
			t.Port = DefaultDNSPort
		default:
			t.Port = DefaultPort
		}
		if t.DNS != nil && t.DNS.Query == "" {
			t.DNS.Query = probe.DefaultDNSQuery
		}
	}
	c.setHTTP2Defaults()
	c.setTraceDefaults()
}

// Validate reports every problem in the configuration, joined.
func (c *Agent) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Name == "" && !c.KubernetesDiscovery() {
		bad("name", "required (this agent's node name)")
	}
	if c.Class != ClassNode && c.Class != ClassPod {
		bad("class", "%q not one of node, pod", c.Class)
	}
	if c.Listen == "" {
		bad("listen", "required, an address:port such as 198.18.1.11:9808")
	} else if ap, err := netip.ParseAddrPort(c.Listen); err != nil {
		bad("listen", "%q is not an IP:port (%v)", c.Listen, err)
	} else if ap.Addr().IsUnspecified() && c.Source == "" && !c.KubernetesDiscovery() {
		bad("source", "required when listen is %s: the address probes are sent from", ap.Addr())
	}
	if c.Source != "" {
		if _, err := ParseSources(c.Source); err != nil {
			bad("source", "%v", err)
		}
	}
	c.validateDiscovery(bad)
	if c.Log != "json" && c.Log != "text" {
		bad("log", "%q not one of json, text", c.Log)
	}
	p := c.Probing
	if p.Interval.D() < 10*time.Millisecond {
		bad("probing.interval", "%s is below the 10ms minimum", p.Interval.D())
	}
	if p.Timeout.D() <= 0 {
		bad("probing.timeout", "must be positive, got %s", p.Timeout.D())
	}
	if p.Window.D() < p.Interval.D() {
		bad("probing.window", "%s is shorter than probing.interval %s", p.Window.D(), p.Interval.D())
	}
	if p.Flows < 1 || p.Flows > maxFlows {
		bad("probing.flows", "%d not in 1..%d", p.Flows, maxFlows)
	}
	for i, proto := range p.Protocols {
		if !slices.Contains(probe.Protocols, proto) {
			bad(fmt.Sprintf("probing.protocols[%d]", i), "%q not one of %s", proto, protocolList())
		} else if slices.Index(p.Protocols, proto) != i {
			bad(fmt.Sprintf("probing.protocols[%d]", i), "%q listed twice", proto)
		}
	}
	if e := p.PMTU.Every; e != 0 && (e < 2 || e > maxPMTUEvery) {
		bad("probing.pmtu.every", "%d not in 2..%d (or 0: off): one tcp_syn probe in every is sent large", e, maxPMTUEvery)
	} else if e != 0 && !slices.Contains(p.Protocols, probe.ProtocolTCPSYN) {
		bad("probing.pmtu.every", "needs tcp_syn in probing.protocols: the large probes are its flows'")
	}
	if s := p.PMTU.Size; s != 0 && (s < minPMTUSize || s > probe.MaxProbeSize) {
		bad("probing.pmtu.size", "%d not in %d..%d bytes (or 0: the route's interface MTU)", s, minPMTUSize, probe.MaxProbeSize)
	}
	if p.MaxProbesPerSecond < 0 {
		bad("probing.maxProbesPerSecond", "must be positive, got %g", p.MaxProbesPerSecond)
	}
	if ports := p.SourcePorts(); p.MaxTargets < 1 || ports > maxSourcePorts {
		bad("probing.maxTargets", "%d x probing.flows %d must be between 1 and %d source ports", p.MaxTargets, p.Flows, maxSourcePorts)
	} else if p.SourcePortBase < 1024 || p.SourcePortBase > 65536-ports {
		bad("probing.sourcePortBase", "%d: the %d source ports (maxTargets x flows) must fit in 1024..65535", p.SourcePortBase, ports)
	} else if len(c.Targets) > p.MaxTargets {
		bad("targets", "%d targets, more than probing.maxTargets %d", len(c.Targets), p.MaxTargets)
	}
	// A dual-stack peer is one target per family under one name.
	names := map[[2]string]int{}
	for i, t := range c.Targets {
		f := fmt.Sprintf("targets[%d]", i)
		a, _ := netip.ParseAddr(t.Address)
		key := [2]string{t.Name, api.FamilyOf(a)}
		if t.Name == "" {
			bad(f+".name", "required")
		} else if j, dup := names[key]; dup {
			bad(f+".name", "%q already used by targets[%d] for the same address family", t.Name, j)
		} else {
			names[key] = i
		}
		if a, err := netip.ParseAddr(t.Address); err != nil || a.Zone() != "" {
			bad(f+".address", "%q is not an IP address without zone", t.Address)
		} else if a.IsUnspecified() {
			// The agent converts a static target as a plan's (agent's
			// targetsFromPeers), which refuses it: a start would fail.
			bad(f+".address", "%q is unspecified: name the target's own address", t.Address)
		} else if fam := api.FamilyOf(a); !c.probesFamily(fam) {
			bad(f+".address", "%q is %s, and no source of that family is configured (source %q)", t.Address, fam, c.Source)
		}
		if t.Class != ClassNode && t.Class != ClassPod && t.Class != ClassLB {
			bad(f+".class", "%q not one of node, pod, lb", t.Class)
		}
		if t.Port < 1 || t.Port > 65535 {
			bad(f+".port", "%d not in 1..65535", t.Port)
		}
		if t.Class == ClassLB && !slices.ContainsFunc(p.Protocols, func(proto probe.Protocol) bool {
			return api.Probed(ClassLB, string(proto)) && (proto != probe.ProtocolHTTP2Ping || t.HTTP2 != HTTP2None) && (proto != probe.ProtocolDNS || t.DNS != nil)
		}) {
			bad(f+".class", "lb target would not be probed: lb targets get no icmp (a VIP rarely answers echo); add tcp_syn to probing.protocols, or http2_ping with an http2 mode other than none, or dns with a dns: block")
		}
		if t.DNS != nil {
			if !slices.Contains(p.Protocols, probe.ProtocolDNS) {
				bad(f+".dns", "probing.protocols does not list dns: the target would get no DNS probe")
			}
			if t.DNS.Query != "" {
				if _, err := probe.CheckDNSName(t.DNS.Query); err != nil {
					bad(f+".dns.query", "%v", err)
				}
			}
		}
	}
	c.validateHTTP2(bad)
	c.validateTrace(bad)
	return errors.Join(errs...)
}

// SourceAddr is the address probes leave from: the first of source, else
// the listen address's IP. Valid after Validate.
func (c *Agent) SourceAddr() netip.Addr {
	if srcs := c.SourceAddrs(); len(srcs) > 0 {
		return srcs[0]
	}
	return netip.Addr{}
}

// SourceAddrs are the addresses probes leave from, at most one per
// family, in the order source lists them; else the listen address's IP.
// Valid after Validate.
func (c *Agent) SourceAddrs() []netip.Addr {
	if srcs, err := ParseSources(c.Source); err == nil && len(srcs) > 0 {
		return srcs
	}
	ap, err := netip.ParseAddrPort(c.Listen)
	if err != nil {
		return nil
	}
	return []netip.Addr{ap.Addr().Unmap()}
}

// SourceFor is the source address of family, invalid when the agent has
// none of that family.
func (c *Agent) SourceFor(family string) netip.Addr {
	for _, a := range c.SourceAddrs() {
		if api.FamilyOf(a) == family {
			return a
		}
	}
	return netip.Addr{}
}

// probesFamily reports whether a target of family can be probed: the
// agent has a source of that family, or its source is still to come
// (Kubernetes discovery, or an unspecified listen address Validate
// reports on its own).
func (c *Agent) probesFamily(family string) bool {
	if srcs := c.SourceAddrs(); len(srcs) == 0 || len(srcs) == 1 && srcs[0].IsUnspecified() {
		return true
	}
	return c.SourceFor(family).IsValid()
}

// ParseSources parses a source list: one or two addresses,
// comma-separated, at most one per family, none unspecified.
func ParseSources(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		a, err := netip.ParseAddr(f)
		switch {
		case err != nil || a.Zone() != "":
			return nil, fmt.Errorf("%q is not an IP address without zone", f)
		case a.IsUnspecified():
			return nil, fmt.Errorf("%q is unspecified: name the address probes leave from", f)
		}
		a = a.Unmap()
		for _, b := range out {
			if api.FamilyOf(a) == api.FamilyOf(b) {
				return nil, fmt.Errorf("%s and %s: at most one address per family", b, a)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// SourcePorts is how many tcp_syn source ports the agent reserves:
// maxTargets x flows, saturated rather than wrapped, so that a huge
// maxTargets cannot multiply to a small or negative count (a start used to
// see 0 ports where --check had seen none missing).
func (p Probing) SourcePorts() int {
	t, f := max(p.MaxTargets, 0), max(p.Flows, 1)
	if t > math.MaxInt32/f {
		return math.MaxInt32
	}
	return t * f
}

// TCPSYNConfig is the probe.TCPSYNConfig the agent opens the tcp_syn
// engine of src's family with (agent.ConfigFrom keeps it in the agent's
// runtime config). A sourcePortBase outside 0..65535 (which Validate
// rejects) is clamped, never wrapped.
func (c *Agent) TCPSYNConfig(src netip.Addr) probe.TCPSYNConfig {
	return probe.TCPSYNConfig{
		Source:   src,
		PortBase: uint16(min(max(c.Probing.SourcePortBase, 0), math.MaxUint16)),
		Ports:    c.Probing.SourcePorts(),
		Sized:    c.Probing.PMTU.Every > 0,
	}
}

// PerTarget reports whether per-target metric labels are on.
func (c *Agent) PerTarget() bool { return c.Metrics.PerTarget == nil || *c.Metrics.PerTarget }

func protocolList() string {
	s := make([]string, len(probe.Protocols))
	for i, p := range probe.Protocols {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// cleanYAMLError strips the library's Go type names from decoding errors:
// people read field names, not "type config.plain".
func cleanYAMLError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "error converting YAML to JSON: ")
	s = strings.TrimPrefix(s, "error unmarshaling JSON: while decoding JSON: ")
	s = strings.ReplaceAll(s, "json: ", "")
	return s
}

// prefixErrors prefixes every joined error with the file name, so each
// problem reads "file: field: message" on its own line.
func prefixErrors(name string, err error) error {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			errs = append(errs, fmt.Errorf("%s: %w", name, e))
		}
	} else {
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	return errors.Join(errs...)
}
