package agent

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/probe"
)

// Config is the agent's runtime configuration: the file's, converted once
// by ConfigFrom into the values the agent reads (durations, parsed
// addresses, the probe engines' own configs, converted targets), as
// config.Matrix.MatrixConfig does for the matrix. This file is the only
// one of the package that reads config's file types.
type Config struct {
	// Name is the agent's identity (its node's or pod's name); Class is
	// api.ClassNode or api.ClassPod.
	Name, Class string
	// Labels are the agent's own, reported in its observations.
	Labels map[string]string
	// Sources are the addresses probes leave from, at most one per
	// family; the first is the agent's address.
	Sources []netip.Addr
	// Listen are the addresses the HTTP endpoints bind (listenAddrs).
	Listen []string
	// Server is the HTTP server's: the listen address that names a
	// generated certificate, and TLS when the file's tls block is set.
	Server probe.ResponderConfig
	// Planned: the matrix plans this agent's targets (discovery:
	// kubernetes), and the agent serves its observations to the matrix
	// alone (pullkey.go).
	Planned bool

	// Protocols are the probed protocols, in the file's order.
	Protocols []probe.Protocol
	// Interval is each flow's probe period, Timeout a probe's wait for
	// its answer, Window the span observations cover.
	Interval, Timeout, Window time.Duration
	// Flows is the tcp_syn flows per target.
	Flows int
	// MaxProbesPerSecond bounds the agent's total probe rate.
	MaxProbesPerSecond float64
	// MaxTargets caps the targets probed at once.
	MaxTargets int
	// PerTarget adds the target label to the per-target series.
	PerTarget bool
	// TCPSYN is every tcp_syn engine's config but its Source, which is
	// each family's source.
	TCPSYN probe.TCPSYNConfig
	// HTTP2 is every HTTP/2 pinger's config before the target's own
	// fields; its DeadAfter also feeds the black-hole detector.
	HTTP2 probe.HTTP2Config
	// Tracing schedules the traces of the tcp_syn flows (paths.go).
	Tracing Tracing
	// PMTU sends one tcp_syn probe in Every padded to Size bytes (0: the
	// route's interface MTU); Every 0 is off.
	PMTU PMTU

	// Targets are the static targets, converted as a plan's are.
	Targets []Target
}

// Tracing is when the agent traces its tcp_syn flows and how.
type Tracing struct {
	On bool
	// Interval is how often each flow is traced when nothing happens.
	Interval time.Duration
	// BudgetPerMinute caps the traces started per minute, every reason
	// together.
	BudgetPerMinute int
	// Trace is one flow's trace.
	Trace probe.TraceConfig
}

// PMTU is probing.pmtu: the large probes of the tcp_syn flows.
type PMTU struct{ Every, Size int }

// ConfigFrom builds the agent's runtime config from a loaded file, once:
// the probe engines' configs are config's own builders' (TCPSYNConfig,
// HTTP2Config, TraceConfig), which Validate checks, and the static
// targets go through the plan's converter as api.Peer. It fails only on a
// target that converter refuses, which a validated file has none of;
// the checks of the built config are Check's.
func ConfigFrom(c *config.Agent) (Config, error) {
	p := c.Probing
	cfg := Config{
		Name: c.Name, Class: c.Class, Labels: c.Labels,
		Sources: c.SourceAddrs(),
		Listen:  listenAddrs(c),
		Server:  probe.ResponderConfig{Listen: c.Listen},
		Planned: c.KubernetesDiscovery(),

		Protocols: p.Protocols,
		Interval:  p.Interval.D(), Timeout: p.Timeout.D(), Window: p.Window.D(),
		Flows:              p.Flows,
		MaxProbesPerSecond: p.MaxProbesPerSecond,
		MaxTargets:         p.MaxTargets,
		PerTarget:          c.PerTarget(),
		TCPSYN:             c.TCPSYNConfig(netip.Addr{}),
		HTTP2:              c.HTTP2Config(),
		Tracing: Tracing{
			On: p.Trace.On(), Interval: p.Trace.Interval.D(), BudgetPerMinute: p.Trace.BudgetPerMinute,
			Trace: c.TraceConfig(),
		},
		PMTU: PMTU{Every: p.PMTU.Every, Size: p.PMTU.Size},
	}
	if s := c.TLS; s != nil {
		cfg.Server.TLS = &probe.ResponderTLS{CertFile: s.CertFile, KeyFile: s.KeyFile, Hosts: s.Hosts}
	}
	ts, bad := targetsFromPeers(staticPeers(c.Targets), func(i int, _ *api.PeerHTTP2) string { return c.Targets[i].CAFile })
	cfg.Targets = ts
	for i, err := range bad {
		bad[i] = fmt.Errorf("static target %w", err)
	}
	return cfg, errors.Join(bad...)
}

// staticPeers are the static targets in the plan's form, so that one
// converter (targetsFromPeers) makes every Target. Their CA files, which
// a plan never carries, the converter asks for by index.
func staticPeers(ts []config.Target) []api.Peer {
	out := make([]api.Peer, len(ts))
	for i, t := range ts {
		out[i] = api.Peer{Name: t.Name, Class: t.Class, Address: t.Address, Port: uint16(t.Port), Labels: t.Labels, DNS: t.DNS,
			HTTP2: &api.PeerHTTP2{Mode: cmp.Or(t.HTTP2, api.DefaultHTTP2(t.Class)), ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}}
	}
	return out
}

// listenAddrs are where the agent listens: the listen address, except for
// a node agent in a cluster whose listen address is unspecified: under
// hostNetwork that is every interface of the node (a CNI's gateway, a
// public NIC), where no NetworkPolicy reaches, so it binds its node's own
// addresses (its sources, the downward API's status.podIPs) and loopback
// (kubectl port-forward) on that port instead.
func listenAddrs(cfg *config.Agent) []string {
	ap, err := netip.ParseAddrPort(cfg.Listen)
	srcs, serr := config.ParseSources(cfg.Source)
	if err != nil || !ap.Addr().IsUnspecified() || cfg.Class != config.ClassNode || !cfg.KubernetesDiscovery() || serr != nil || len(srcs) == 0 {
		return []string{cfg.Listen}
	}
	var out []string
	for _, a := range srcs {
		out = append(out, netip.AddrPortFrom(a, ap.Port()).String())
	}
	return append(out, netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), ap.Port()).String())
}
