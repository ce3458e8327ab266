package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/probe"
)

// target is one peer being probed and its windows.
type target struct {
	Target
	eng    *engines // its family's
	path   string
	ctx    context.Context // its probes'; cancel ends them
	cancel context.CancelFunc
	ports  []uint16 // tcp_syn source ports, one per flow
	// mtuSize is the size of its flows' large probes (probing.pmtu), 0
	// when none are sent.
	mtuSize int
	h2      *h2Target // nil unless pinged over HTTP/2
	// dns are the DNS flows of dns_udp and dns_tcp, when asked.
	dns   map[probe.Protocol][]*probe.DNSFlow
	added time.Time

	// tasks are its flows in the schedule; stopped, once set, keeps them
	// out of it (both guarded by the scheduler's mutex). inflight counts
	// its probes in flight.
	tasks    []*flowTask
	stopped  bool
	inflight sync.WaitGroup

	mu     sync.Mutex
	protos map[probe.Protocol]*protoState
	// echoAt is when the target last answered ICMP echo, otherAt when it
	// last answered any other protocol; zero: never (guarded by mu).
	echoAt, otherAt time.Time
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
	var errs []error
	want := map[targetKey]Target{}
	for _, t := range ts {
		if t.Name == a.cfg.Name {
			continue
		}
		if a.fams[t.Family()] == nil {
			errs = append(errs, fmt.Errorf("target %s (%s) skipped: no %s source to probe it from", t.Name, t.Addr, t.Family()))
			continue
		}
		t.Backends = slices.Sorted(slices.Values(t.Backends))
		want[t.key()] = t
	}
	a.mu.Lock()
	var gone []*target
	for k, t := range a.targets {
		if w, ok := want[k]; !ok || w.Addr != t.Addr || w.Port != t.Port || w.Class != t.Class || w.HTTP2 != t.HTTP2 || w.DNS != t.DNS || w.DNSOnly != t.DNSOnly {
			gone = append(gone, t)
			delete(a.targets, k)
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
	keys := make([]targetKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	for _, k := range keys {
		if t, ok := a.targets[k]; ok {
			// The same peer with new labels (a node marked ready=unknown,
			// a rack label set) or backends (a Service's endpoints
			// changed): report them, keep probing.
			w := want[k]
			if !maps.Equal(w.Labels, t.Labels) || !slices.Equal(w.Backends, t.Backends) {
				t.mu.Lock()
				t.Labels, t.Backends = w.Labels, w.Backends
				t.mu.Unlock()
			}
			continue
		}
		if len(a.targets) >= a.cfg.MaxTargets {
			errs = append(errs, fmt.Errorf("target %s (%s) skipped: probing.maxTargets %d reached", k.name, k.family, a.cfg.MaxTargets))
			continue
		}
		t, err := a.startTarget(ctx, want[k])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a.targets[k] = t
		added++
	}
	a.m.targets.Set(float64(len(a.targets)))
	return errors.Join(errs...)
}

func (a *Agent) startTarget(ctx context.Context, tg Target) (*target, error) {
	p := a.cfg
	t := &target{Target: tg, eng: a.fams[tg.Family()], path: api.PathClass(a.cfg.Class, tg.Class), added: a.now(), protos: map[probe.Protocol]*protoState{}}
	syn := t.eng.syn
	if tg.DNSOnly {
		syn = nil // asked over DNS alone: no flows, no ports
	}
	if syn != nil {
		ports, err := syn.AllocPorts(p.Flows)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", tg.Name, err)
		}
		t.ports = ports
		if p.PMTU.Every > 0 {
			if t.mtuSize = p.PMTU.Size; t.mtuSize == 0 {
				t.mtuSize = a.routeMTU(t.eng.src, tg.Addr)
			}
			if t.mtuSize == 0 {
				a.log.Debug("no large probes: the MTU towards the target is unknown (set probing.pmtu.size)", "peer", tg.Name, "address", tg.Addr.String())
			}
		}
	}
	var h2 *h2Target
	var err error
	if !tg.DNSOnly {
		h2, err = a.newH2Target(tg, t.path)
	}
	if err == nil && slices.Contains(p.Protocols, probe.ProtocolDNS) && tg.DNS != "" {
		t.dns, err = openDNS(t)
	}
	if err != nil {
		if t.ports != nil {
			syn.FreePorts(t.ports)
		}
		if h2 != nil {
			h2.pinger.Close()
		}
		return nil, err
	}
	t.h2 = h2
	t.ctx, t.cancel = context.WithCancel(ctx)
	var tasks []*flowTask
	for _, configured := range p.Protocols {
		for _, proto := range reportedAs(configured) {
			flows := 1
			if tg.DNSOnly && proto != probe.ProtocolDNSUDP && proto != probe.ProtocolDNSTCP {
				continue
			}
			switch proto {
			case probe.ProtocolTCPSYN:
				flows = len(t.ports)
				if t.mtuSize > 0 {
					// Its large probes: sent by tcp_syn's own tasks (one
					// probe of a port in flight at a time).
					big := &protoState{series: a.m.seriesFor(probe.ProtocolTCPSYNMTU, t.path, tg.Family(), tg.Name), live: make([]bool, flows)}
					for range flows {
						big.flows = append(big.flows, newWindow(p.Window, p.Interval*time.Duration(p.PMTU.Every)))
					}
					t.protos[probe.ProtocolTCPSYNMTU] = big
				}
			case probe.ProtocolICMP:
				if !api.Probed(tg.Class, string(proto)) {
					continue // lb: a VIP does not answer echo (api.Probed)
				}
			case probe.ProtocolHTTP2Ping:
				if t.h2 == nil {
					continue // http2: none
				}
			case probe.ProtocolDNSUDP, probe.ProtocolDNSTCP:
				if flows = len(t.dns[proto]); flows == 0 {
					continue // no dns: block, or no DNS planned
				}
			default:
				continue
			}
			ps := &protoState{series: a.m.seriesFor(proto, t.path, tg.Family(), tg.Name), live: make([]bool, flows)}
			for flow := range flows {
				ps.flows = append(ps.flows, newWindow(p.Window, p.Interval))
				tasks = append(tasks, &flowTask{t: t, proto: proto, flow: flow})
			}
			t.protos[proto] = ps
		}
	}
	a.sched.add(t, tasks)
	a.log.Debug("target added", "peer", tg.Name, "family", tg.Family(), "address", tg.Addr.String(), "path", t.path)
	return t, nil
}

func (a *Agent) stopTarget(t *target) {
	a.sched.remove(t)
	t.cancel()
	closeDNS(t.dns) // a DNS probe in flight ends on its flow's close, not on t.ctx
	t.inflight.Wait()
	if t.eng.syn != nil && t.ports != nil {
		t.eng.syn.FreePorts(t.ports)
	}
	a.stopHTTP2(t)
	a.m.forget(t.Name, t.Family())
	a.paths.forget(t)
	a.log.Debug("target removed", "peer", t.Name)
}

// compareKeys orders targets by name, IPv4 before IPv6.
func compareKeys(x, y targetKey) int {
	return cmp.Or(strings.Compare(x.name, y.name), strings.Compare(x.family, y.family))
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
	now := a.now()
	if t.Class == api.ClassLB {
		t.mu.Lock()
		live := ps.live[flow] || r.Outcome == probe.OK
		ps.live[flow] = live
		t.mu.Unlock()
		if !live && now.Sub(t.added) < a.lbSettle {
			return // not yet programmed, perhaps: neither sent nor lost
		}
	}
	if proto != probe.ProtocolHTTP2Ping && t.Class == api.ClassLB && refusedNewFlow(r) {
		// A VIP that refuses a new connection or a lookup, or whose
		// kube-proxy rejects it (a Service without endpoints), fails its
		// clients as surely as one that drops it: for an lb target that
		// is loss. An agent that refuses (restarting) is no loss.
		r.Outcome = probe.Lost
	}
	t.mu.Lock()
	if !t.counts(now, a.cfg.Window, proto, ps.flows[flow], r) {
		t.mu.Unlock()
		return // an echo the target does not answer: neither sent nor lost
	}
	ps.flows[flow].add(now, r)
	t.mu.Unlock()
	a.m.record(ps.series, proto, r)
	a.paths.lost(t, proto, flow, r)
	if r.Outcome == probe.LocalError {
		a.log.Debug("probe error", "peer", t.Name, "protocol", string(proto), "reason", r.Reason, "err", r.Err)
	}
}

// counts notes when the target answered and says whether r counts. An
// echo that is lost while the target does not answer echo (notAnswering)
// does not: a host firewall or a security group that drops echo is no
// loss. Caller holds t.mu.
func (t *target) counts(now time.Time, span time.Duration, proto probe.Protocol, w *window, r probe.Result) bool {
	answered := r.Outcome.Reached()
	switch {
	case proto != probe.ProtocolICMP:
		if answered {
			t.otherAt = now
		}
	case r.Outcome == probe.OK:
		if t.notAnswering(span) {
			w.reset() // answering (again): losses from before are history
		}
		t.echoAt = now
	case r.Outcome == probe.Lost:
		return !t.notAnswering(span)
	}
	return true
}

// notAnswering says whether the target does not answer ICMP echo: it has
// not since it was added, or another protocol answered it more than span
// after echo last did (a firewall rule added since). Its echoes are then
// no data, never loss, and tcp_syn and http2_ping carry the diagnosis. A
// target that answered echo and then answers nothing at all is cut off,
// not filtered: its echoes count as lost. Caller holds t.mu.
func (t *target) notAnswering(span time.Duration) bool {
	return t.echoAt.IsZero() || t.otherAt.Sub(t.echoAt) > span
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
