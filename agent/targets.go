package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/probe"
)

// target is one peer being probed and its windows.
type target struct {
	Target
	path   string
	ctx    context.Context // its probes'; cancel ends them
	cancel context.CancelFunc
	ports  []uint16  // tcp_syn source ports, one per flow
	h2     *h2Target // nil unless pinged over HTTP/2
	added  time.Time

	// tasks are its flows in the schedule; stopped, once set, keeps them
	// out of it (both guarded by the scheduler's mutex). inflight counts
	// its probes in flight.
	tasks    []*flowTask
	stopped  bool
	inflight sync.WaitGroup

	mu     sync.Mutex
	protos map[probe.Protocol]*protoState
}

type protoState struct {
	series series
	flows  []*window
	// live[flow] is set (under the target's mu) once an lb target's flow
	// has answered: its results count from then on.
	live []bool
}

// SetTargets makes ts the set of probed targets: new ones start, departed
// ones stop and their series are deleted, unchanged ones go on undisturbed.
// The agent itself is never its own target.
func (a *Agent) SetTargets(ctx context.Context, ts []Target) error {
	want := map[string]Target{}
	for _, t := range ts {
		if t.Name != a.cfg.Name {
			t.Backends = slices.Sorted(slices.Values(t.Backends))
			want[t.Name] = t
		}
	}
	var errs []error
	a.mu.Lock()
	var gone []*target
	for name, t := range a.targets {
		if w, ok := want[name]; !ok || w.Addr != t.Addr || w.Port != t.Port || w.Class != t.Class || w.HTTP2 != t.HTTP2 {
			gone = append(gone, t)
			delete(a.targets, name)
		}
	}
	a.mu.Unlock()
	for _, t := range gone {
		a.stopTarget(t)
	}
	added := 0
	defer func() {
		a.gen.Add(1) // after a.mu: readers that see the change get it
		if len(gone) > 0 || added > 0 {
			a.kickFirstHop() // other routes may say another first hop
		}
	}()
	a.mu.Lock()
	defer a.mu.Unlock()
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if t, ok := a.targets[name]; ok {
			// The same peer with new labels (a node marked ready=unknown,
			// a rack label set) or backends (a Service's endpoints
			// changed): report them, keep probing.
			w := want[name]
			if !maps.Equal(w.Labels, t.Labels) || !slices.Equal(w.Backends, t.Backends) {
				t.mu.Lock()
				t.Labels, t.Backends = w.Labels, w.Backends
				t.mu.Unlock()
			}
			continue
		}
		if len(a.targets) >= a.cfg.Probing.MaxTargets {
			errs = append(errs, fmt.Errorf("target %s skipped: probing.maxTargets %d reached", name, a.cfg.Probing.MaxTargets))
			continue
		}
		t, err := a.startTarget(ctx, want[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a.targets[name] = t
		added++
	}
	a.m.targets.Set(float64(len(a.targets)))
	return errors.Join(errs...)
}

func (a *Agent) startTarget(ctx context.Context, tg Target) (*target, error) {
	p := a.cfg.Probing
	t := &target{Target: tg, path: api.PathClass(a.cfg.Class, tg.Class), added: a.now(), protos: map[probe.Protocol]*protoState{}}
	if a.syn != nil {
		ports, err := a.syn.AllocPorts(p.Flows)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", tg.Name, err)
		}
		t.ports = ports
	}
	h2, err := a.newH2Target(tg, t.path)
	if err != nil {
		if t.ports != nil {
			a.syn.FreePorts(t.ports)
		}
		return nil, err
	}
	t.h2 = h2
	t.ctx, t.cancel = context.WithCancel(ctx)
	var tasks []*flowTask
	for _, proto := range p.Protocols {
		flows := 1
		switch proto {
		case probe.ProtocolTCPSYN:
			flows = len(t.ports)
		case probe.ProtocolICMP:
			if !config.Probed(tg.Class, proto) {
				continue // lb: a VIP does not answer echo (config.Probed)
			}
		case probe.ProtocolHTTP2Ping:
			if t.h2 == nil {
				continue // http2: none
			}
		default:
			continue // engines of later issues
		}
		ps := &protoState{series: a.m.seriesFor(proto, t.path, tg.Name), live: make([]bool, flows)}
		for flow := range flows {
			ps.flows = append(ps.flows, newWindow(p.Window.D(), p.Interval.D()))
			tasks = append(tasks, &flowTask{t: t, proto: proto, flow: flow})
		}
		t.protos[proto] = ps
	}
	a.sched.add(t, tasks)
	a.log.Debug("target added", "peer", tg.Name, "address", tg.Addr.String(), "path", t.path)
	return t, nil
}

func (a *Agent) stopTarget(t *target) {
	a.sched.remove(t)
	t.cancel()
	t.inflight.Wait()
	if a.syn != nil && t.ports != nil {
		a.syn.FreePorts(t.ports)
	}
	a.stopHTTP2(t)
	a.m.forget(t.Name)
	a.paths.forget(t)
	a.log.Debug("target removed", "peer", t.Name)
}

// lbSettle bounds how long a new lb target's flow waits for its first
// answer before its results count: kube-proxy programs a Service on this
// node in about the time the agent learns of it, and until then its VIP
// drops or rejects. Each flow settles on its own: a SYN sent before the
// rules were there leaves a conntrack entry without DNAT that later SYNs
// of the same 5-tuple follow until it is cleared, while other flows
// already pass. A Service that never answers is reported once this has
// passed.
const lbSettle = 10 * time.Second

func (a *Agent) record(t *target, proto probe.Protocol, flow int, r probe.Result) {
	ps := t.protos[proto]
	if t.Class == config.ClassLB {
		t.mu.Lock()
		live := ps.live[flow] || r.Outcome == probe.OK
		ps.live[flow] = live
		t.mu.Unlock()
		if !live && a.now().Sub(t.added) < a.lbSettle {
			return // not yet programmed, perhaps: neither sent nor lost
		}
	}
	if proto == probe.ProtocolTCPSYN && t.Class == config.ClassLB && refusedNewFlow(r) {
		// A VIP that refuses a new connection, or whose kube-proxy
		// rejects it (a Service without endpoints), fails its clients
		// as surely as one that drops it: for an lb target that is
		// loss. An agent that refuses (restarting) is no loss.
		r.Outcome = probe.Lost
	}
	t.mu.Lock()
	ps.flows[flow].add(a.now(), r)
	t.mu.Unlock()
	a.m.record(ps.series, proto, r)
	a.paths.lost(t, proto, flow, r)
	if r.Outcome == probe.LocalError {
		a.log.Debug("probe error", "peer", t.Name, "protocol", string(proto), "reason", r.Reason, "err", r.Err)
	}
}

// SetLabels replaces the labels the agent reports for itself: with
// Kubernetes discovery it learns its node's zone and rack only once the
// first snapshot arrives.
func (a *Agent) SetLabels(l map[string]string) {
	a.mu.Lock()
	a.labels = maps.Clone(l)
	a.mu.Unlock()
	a.gen.Add(1)
}

// refusedNewFlow reports whether r is a refusal: a RST or unreachable from
// the target, or this host's firewall rejecting the SYN.
func refusedNewFlow(r probe.Result) bool {
	return r.Outcome == probe.Refused || r.Outcome == probe.LocalError && r.Reason == probe.ReasonRejected
}
