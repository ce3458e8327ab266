package tracereport

import (
	"errors"
	"net/netip"
	"slices"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/probe"
)

// Trace is one traceroute of a target's flows, what New reports on.
type Trace struct {
	// Host is the target as it was asked for: a name, or its address.
	Host         string
	Target       netip.Addr
	Source       netip.Addr
	Port         uint16
	ProbesPerHop int
	// ProbeSize is the probes' padded size (probe.TraceConfig.Size).
	ProbeSize int
	Duration  time.Duration
	Flows     []probe.FlowTrace
	// Known is, by source port, what the matrix holds of each flow: its
	// probes over the agent's window, which the inference adds to the
	// trace's handful, and the path its earlier traces found, which
	// fills the hops this trace heard nothing from (rate-limited ICMP).
	Known map[uint16]matrix.PairFlow
	// At is when the trace ended: the inference's one round is taken
	// then, as the report is pure and reads no clock. Required.
	At time.Time
}

// New builds the report of tr. The matrix's config names the hops and
// the inferred suspects, and sets the thresholds of the localization;
// the zero Config names nothing.
func New(tr Trace, cfg matrix.Config) (Report, error) {
	if tr.At.IsZero() {
		return Report{}, errors.New("tracereport: the trace's time (Trace.At) is unset")
	}
	fts := tr.Flows
	rep := Report{
		Host: tr.Host, Target: tr.Target.String(), Port: tr.Port, Source: tr.Source.String(), Flows: len(fts),
		ProbesPerHop: tr.ProbesPerHop, ProbeSize: tr.ProbeSize, DurationSeconds: tr.Duration.Seconds(), Paths: []Path{}, Suspects: []Suspect{}, FlowList: []Flow{},
		Inferred: []matrix.FlowSuspect{},
	}
	name := nameOf(cfg)
	suspects := map[string]*Suspect{}
	// Flows whose every hop answered make the paths; a flow with silent
	// hops joins the one path it fits, or stands alone when it fits none
	// or several.
	complete := func(ft probe.FlowTrace) bool { return !slices.Contains(ft.Path(), "") }
	ordered := slices.Concat(
		slices.DeleteFunc(slices.Clone(fts), func(ft probe.FlowTrace) bool { return !complete(ft) }),
		slices.DeleteFunc(slices.Clone(fts), complete))
	var pathAddrs [][]string // each path's hop addresses, by index into rep.Paths
	for _, ft := range ordered {
		addrs := ft.Path()
		lr := ft.Loss(probe.DefaultNoise)
		tf := Flow{SourcePort: ft.SourcePort, Hops: addrs, Reached: ft.Reached,
			Sent: ft.Sent, Received: ft.Received, Lossy: lr.Lossy, SuspectHop: lr.SuspectHop}
		for _, h := range ft.Hops {
			if h.Inferred {
				tf.InferredTTLs = append(tf.InferredTTLs, h.TTL)
			}
		}
		rep.FlowList = append(rep.FlowList, tf)
		i, fits := -1, 0
		for j, pa := range pathAddrs {
			if slices.Equal(pa, addrs) || !complete(ft) && probe.SamePath(pa, addrs) {
				i, fits = j, fits+1
			}
		}
		if fits != 1 {
			i = -1
		}
		if i < 0 {
			rep.Paths = append(rep.Paths, Path{Hops: make([]Hop, len(addrs)), SuspectHop: -1, Reached: ft.Reached})
			pathAddrs = append(pathAddrs, addrs)
			i = len(rep.Paths) - 1
		}
		p := &rep.Paths[i]
		pathAddrs[i] = probe.MergePath(pathAddrs[i], addrs)
		p.SourcePorts = append(p.SourcePorts, ft.SourcePort)
		p.Sent += ft.Sent
		p.Received += ft.Received
		for j, h := range ft.Hops {
			ph := &p.Hops[j]
			ph.TTL = h.TTL
			ph.Sent += h.Sent
			ph.Received += h.Received
			if h.Inferred {
				ph.Inferred++
			}
			ph.RTTSeconds = max(ph.RTTSeconds, h.RTT.Seconds())
		}
		if !lr.Lossy {
			continue
		}
		p.LossyPorts = append(p.LossyPorts, ft.SourcePort)
		if lr.SuspectHop < 0 {
			continue
		}
		p.SuspectHop = lr.SuspectHop
		h := ft.Hops[lr.SuspectHop]
		key := h.Addr.String()
		s := suspects[key]
		if s == nil {
			s = &Suspect{Address: key, Name: name(key)}
			suspects[key] = s
		}
		s.SourcePorts = append(s.SourcePorts, ft.SourcePort)
		s.HopSent += h.Sent
		s.HopReceived += h.Received
		s.EndSent += ft.Sent
		s.EndReceived += ft.Received
	}
	for i := range rep.Paths {
		p := &rep.Paths[i]
		p.Hash = probe.PathHash(pathAddrs[i])
		p.Loss = ratio(p.Sent, p.Received)
		for j := range p.Hops {
			p.Hops[j].Address = pathAddrs[i][j]
			p.Hops[j].Name = name(pathAddrs[i][j])
			p.Hops[j].Loss = ratio(p.Hops[j].Sent, p.Hops[j].Received)
			p.Hops[j].Suspect = j == p.SuspectHop
		}
	}
	slices.SortStableFunc(rep.Paths, func(a, b Path) int { return len(b.SourcePorts) - len(a.SourcePorts) })
	for _, s := range suspects {
		s.HopLoss = ratio(s.HopSent, s.HopReceived)
		s.EndLoss = ratio(s.EndSent, s.EndReceived)
		rep.Suspects = append(rep.Suspects, *s)
	}
	slices.SortFunc(rep.Suspects, func(a, b Suspect) int { return len(b.SourcePorts) - len(a.SourcePorts) })
	slices.SortFunc(rep.FlowList, func(a, b Flow) int { return int(a.SourcePort) - int(b.SourcePort) })
	for _, ft := range fts {
		if k, ok := tr.Known[ft.SourcePort]; ok && k.Stats.Lost <= k.Stats.Sent {
			rep.WindowProbes += k.Stats.Sent
		}
	}
	v, err := inferSuspects(tr.Target, tr.Source, tr.Port, cfg, fts, tr.Known, tr.At)
	if err != nil {
		return rep, err
	}
	rep.Inferred = append(rep.Inferred, v.Suspects...)
	rep.Unlocated = v.Unlocated
	return rep, nil
}

// nameOf names a hop address by the matrix's hops config, "" for a
// silent hop or one it does not cover.
func nameOf(cfg matrix.Config) func(addr string) string {
	if len(cfg.Hops) == 0 {
		return func(string) string { return "" }
	}
	lookup := matrix.NewHopNamer(cfg)
	return func(addr string) string {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return ""
		}
		return lookup(a)
	}
}

// inferSuspects runs the matrix's localization over the flows, as if the
// tracing host were an agent that had probed them: one algorithm for the
// matrix and the trace.
func inferSuspects(dst, src netip.Addr, port uint16, mcfg matrix.Config, fts []probe.FlowTrace, known map[uint16]matrix.PairFlow, at time.Time) (matrix.FlowsVerdict, error) {
	tcp := api.Protocol{Protocol: api.ProtocolTCPSYN}
	lossy := false
	gw := sharedFirstHop(fts)
	for _, ft := range fts {
		k, isKnown := known[ft.SourcePort]
		hops := ft.Path()
		if isKnown {
			hops = probe.MergePath(k.Hops, hops)
		}
		if len(hops) > 1 && hops[0] == "" && gw != "" {
			hops[0] = gw
		}
		if !ft.Reached {
			// A flow that never reached the target ends where it was
			// last heard.
			for len(hops) > 0 && hops[len(hops)-1] == "" {
				hops = hops[:len(hops)-1]
			}
		}
		st := api.Stats{Sent: uint64(ft.Sent), Lost: uint64(ft.Sent - ft.Received)}
		if isKnown && k.Stats.Lost <= k.Stats.Sent {
			st.Sent, st.Lost = st.Sent+k.Stats.Sent, st.Lost+k.Stats.Lost
		}
		tcp.Flows = append(tcp.Flows, api.Flow{SourcePort: ft.SourcePort, Stats: st, Path: &api.FlowPath{Hops: hops, SuspectHop: -1}})
		tcp.Sent += st.Sent
		tcp.Lost += st.Lost
		lossy = lossy || probe.DefaultNoise.Lossy(int(st.Sent), int(st.Lost))
	}
	if !lossy {
		return matrix.FlowsVerdict{}, nil
	}
	agent := api.Agent{Name: src.String(), Class: api.ClassNode, Address: src.String()}
	target := api.Target{Name: dst.String(), Address: dst.String(), Port: port, Class: api.ClassNode, Path: api.PathNodeToNode, Protocols: []api.Protocol{tcp}}
	return matrix.LocalizeFlows(mcfg, agent, target, func(s api.Stats) bool {
		return probe.DefaultNoise.Lossy(int(s.Sent), int(s.Lost))
	}, at)
}

// minFirstHopAnswers is how many flows must have heard the same first hop,
// and none another, for it to stand for the flows that heard none: with
// two gateways, 4 flows agree by chance one time in 8.
const minFirstHopAnswers = 4

// sharedFirstHop is the first hop every flow from this host takes, when
// the flows that heard theirs all heard one address: the host's gateway,
// rate-limited for the rest. Without it, the flows that missed it would
// not count as crossing it, and a first hop could be named from the
// lossy flows that heard it alone.
func sharedFirstHop(fts []probe.FlowTrace) string {
	seen, n := "", 0
	for _, ft := range fts {
		if len(ft.Hops) < 2 || !ft.Hops[0].Addr.IsValid() || ft.Hops[0].Destination {
			continue
		}
		a := ft.Hops[0].Addr.String()
		if seen != "" && a != seen {
			return ""
		}
		seen, n = a, n+1
	}
	if n < minFirstHopAnswers {
		return ""
	}
	return seen
}

func ratio(sent, recv int) float64 {
	if sent == 0 {
		return 0
	}
	return float64(sent-recv) / float64(sent)
}

// The report's types are api's, which owns every type an endpoint
// serves; the aliases keep this package's names.
type (
	Report  = api.TraceReport
	Path    = api.TraceReportPath
	Flow    = api.TraceReportFlow
	Hop     = api.TraceReportHop
	Suspect = api.TraceReportSuspect
)
