package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/hub"
	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/probe"
)

// FabricSpec describes a lab fabric with agents on every host and the
// matrix: what `prober lab demo` runs and the scenario suite drives.
type FabricSpec struct {
	// Lab is the fabric; a lab with its prefix is removed first (the
	// leftovers of a crashed run).
	Lab    lab.Spec
	Prober Prober
	// Interval is the agents' probe interval; Window the agents' window
	// and the matrix's.
	Interval, Window time.Duration
	// PMTUEvery turns the agents' large probes on (probing.pmtu.every);
	// 0: off.
	PMTUEvery int
	// Families are the address families the agents probe over
	// (api.FamilyIPv4, api.FamilyIPv6): each agent sends from its
	// address of each and probes each peer, and the VIP, once per
	// family. Nil: every family the lab numbers. {api.FamilyIPv6} on a
	// dual-stack lab is an IPv6 single-stack cluster's data plane (the
	// lab always numbers IPv4 too, but no probe uses it); its agents
	// still listen on both families, and the matrix pulls each at its
	// IPv6 address.
	Families []string
	// Listen is the matrix's address (page, JSON, metrics) in this
	// process's network namespace; "127.0.0.1:0" picks a port.
	Listen string
	// Out gets a line per step and progress while WaitFor waits; nil
	// for none. TTY says Out is a terminal: progress then redraws one
	// line every second, where a log or a pipe gets a line every ten.
	Out io.Writer
	TTY bool
	// Logger gets the lab's and the matrix's logs; nil for none.
	Logger *slog.Logger
}

// Fabric is a running fabric started by StartFabric: namespaces, a
// node-class agent on every node, a pod-class agent in every pod, the
// matrix.
type Fabric struct {
	spec    FabricSpec
	fab     *lab.Fabric
	dir     string
	agents  []*Agent
	hub     *hub.Hub
	stop    context.CancelFunc
	done    chan error
	healthy time.Time
}

// Lab is the fabric's inventory, for faults (Inject, Clear).
func (r *Fabric) Lab() *lab.Fabric { return r.fab }

// Agents are the agents, in the order of the lab's hosts.
func (r *Fabric) Agents() []*Agent { return r.agents }

// Agent returns the agent of the host called name.
func (r *Fabric) Agent(name string) (*Agent, bool) {
	for _, a := range r.agents {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}

// MatrixURL is the base URL of the matrix's page.
func (r *Fabric) MatrixURL() string { return "http://" + r.hub.Addr().String() + "/" }

// Diagnosis is the matrix's latest diagnosis.
func (r *Fabric) Diagnosis() matrix.Diagnosis { return r.hub.Diagnosis() }

// Snapshot is the matrix's latest loss matrix.
func (r *Fabric) Snapshot() matrix.Snapshot { return r.hub.Snapshot() }

// agentProbing is every agent's schedule in a fabric. A lost probe holds
// its flow for the timeout.
func (s FabricSpec) agentProbing() config.Probing {
	return config.Probing{
		Interval: config.Duration(s.Interval), Timeout: config.Duration(time.Second), Window: config.Duration(s.Window),
		Flows: 8, Protocols: []probe.Protocol{probe.ProtocolICMP, probe.ProtocolTCPSYN, probe.ProtocolHTTP2Ping},
		MaxProbesPerSecond: 1000, MaxTargets: 32,
		// The trace budget is higher than in production (30/min): a lab
		// has no switch CPU to protect, and the demo should name a
		// device in seconds, not after the periodic traces of a few
		// minutes.
		Trace: config.TraceProbing{BudgetPerMinute: 600},
		PMTU:  config.PMTUProbing{Every: s.PMTUEvery},
	}
}

// families are the address families the agents probe over: the spec's,
// else every family the lab numbers.
func (s FabricSpec) families() []string {
	if s.Families != nil {
		return s.Families
	}
	if s.Lab.IPv6 {
		return api.Families
	}
	return []string{api.FamilyIPv4}
}

// checkFamilies says what is wrong with the spec's Families, all of it.
func (s FabricSpec) checkFamilies() error {
	if s.Families != nil && len(s.Families) == 0 {
		return errors.New("fabric: families: empty; nil probes over every family the lab numbers")
	}
	var errs []error
	seen := map[string]bool{}
	for i, f := range s.Families {
		switch {
		case !slices.Contains(api.Families, f):
			errs = append(errs, fmt.Errorf("fabric: families[%d]: %q not one of %s", i, f, strings.Join(api.Families, ", ")))
		case seen[f]:
			errs = append(errs, fmt.Errorf("fabric: families[%d]: %q twice", i, f))
		case f == api.FamilyIPv6 && !s.Lab.IPv6:
			errs = append(errs, fmt.Errorf("fabric: families[%d]: %q needs a lab with IPv6 (lab.Spec.IPv6)", i, f))
		}
		seen[f] = true
	}
	return errors.Join(errs...)
}

// agentConfig is a host's agent configuration: nodes probe every other
// node and the LB's VIP; pods probe every other pod and every node (the
// paths seed 004's engineer compared by hand); all of them over each of
// the spec's families.
func (r *Fabric) agentConfig(h lab.Host) *config.Agent {
	var targets []lab.Host
	for _, t := range r.fab.Hosts {
		if t.Name == h.Name || (h.Class == lab.ClassNode && t.Class == lab.ClassPod) {
			continue
		}
		targets = append(targets, t)
	}
	fams := r.spec.families()
	p := r.spec.agentProbing()
	p.MaxTargets *= len(fams) // every peer once per family
	c := agentConfig(h, fams, p, targets...)
	if h.Class == lab.ClassNode {
		for _, f := range fams {
			vip := r.fab.VIP
			if f == api.FamilyIPv6 {
				vip = r.fab.VIP6
			}
			if vip.IsValid() {
				c.Targets = append(c.Targets, VIPTarget(vip))
			}
		}
	}
	return c
}

// WaitFor polls the matrix every second until cond holds or within
// passes, drawing progress on the spec's Out. It returns how long it
// took.
func (r *Fabric) WaitFor(ctx context.Context, within time.Duration, what string, cond func(matrix.Diagnosis, matrix.Snapshot) bool) (time.Duration, error) {
	read := func(context.Context) (matrix.Diagnosis, matrix.Snapshot, error) {
		return r.Diagnosis(), r.Snapshot(), nil
	}
	return waitMatrix(ctx, r.spec.Out, r.spec.TTY, within, what, read, cond)
}

// WaitFilled waits until the matrix has read windows that began after
// every agent served. Agents start one by one and the lab's VIP balances
// onto the agents themselves, so until then a VIP flow can meet a node
// whose agent is not yet listening: refused, which for an lb target is
// loss, and real, but of the start-up, not of the fabric.
func (r *Fabric) WaitFilled(ctx context.Context) error {
	w := r.spec.Window
	_, err := r.WaitFor(ctx, w+30*time.Second, "a full window", func(_ matrix.Diagnosis, snap matrix.Snapshot) bool {
		return len(snap.Groups) > 0 && time.Since(snap.Time) < 5*time.Second && snap.Time.Sub(r.healthy) > w
	})
	return err
}

// Close stops the matrix and the agents and removes the fabric and the
// agents' files.
func (r *Fabric) Close() error {
	var errs []error
	if r.stop != nil {
		r.stop()
		errs = append(errs, <-r.done)
		r.stop = nil
	}
	for _, a := range r.agents {
		errs = append(errs, a.Close())
	}
	if r.dir != "" {
		os.RemoveAll(r.dir)
	}
	fmt.Fprintln(r.spec.Out, "==> cleaning up")
	errs = append(errs, lab.Down(r.spec.Lab.Prefix))
	return errors.Join(errs...)
}
