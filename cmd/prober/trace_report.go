package main

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/probe"
)

// traceReport is what `prober trace` prints: flows grouped by path, and
// the hops where a lossy flow's break starts.
type traceReport struct {
	Host            string      `json:"host"`
	Target          string      `json:"target"`
	Port            uint16      `json:"port"`
	Source          string      `json:"source"`
	Flows           int         `json:"flowCount"`
	ProbesPerHop    int         `json:"probesPerHop"`
	DurationSeconds float64     `json:"durationSeconds"`
	Paths           []tracePath `json:"paths"`
	Suspects        []traceSusp `json:"suspects"`
	// Inferred are what the matrix's localization names from the flows
	// alone: what lossy flows cross and clean flows avoid. It needs no
	// hop to answer past the first, so it stands where rate-limited hops
	// leave no break to read (docs/trace.md).
	Inferred  []matrix.FlowSuspect `json:"inferredSuspects"`
	Unlocated *matrix.Unlocated    `json:"unlocated,omitempty"`
	FlowList  []traceFlow          `json:"flows"`
	Unmatched map[string]uint64    `json:"unmatched,omitempty"`
}

type tracePath struct {
	Hash        string     `json:"hash"`
	SourcePorts []uint16   `json:"sourcePorts"`
	Hops        []traceHop `json:"hops"`
	Reached     bool       `json:"reached"`
	Sent        int        `json:"sent"` // end to end, all its flows
	Received    int        `json:"received"`
	Loss        float64    `json:"loss"`
	LossyPorts  []uint16   `json:"lossySourcePorts,omitempty"`
	// SuspectHop indexes Hops: where the lossy flows' break starts.
	SuspectHop int `json:"suspectHop"`

	addrs []string
}

// traceFlow is one flow's own path and reading.
type traceFlow struct {
	SourcePort uint16   `json:"sourcePort"`
	Hops       []string `json:"hops"`
	Reached    bool     `json:"reached"`
	Sent       int      `json:"sent"`
	Received   int      `json:"received"`
	Lossy      bool     `json:"lossy"`
	SuspectHop int      `json:"suspectHop"`
	// InferredTTLs are the hops no probe heard, filled from the other
	// flows of the trace (docs/trace.md).
	InferredTTLs []int `json:"inferredTTLs,omitempty"`
}

type traceHop struct {
	TTL        int     `json:"ttl"`
	Address    string  `json:"address"` // "" when silent
	Sent       int     `json:"sent"`
	Received   int     `json:"received"`
	Loss       float64 `json:"loss"`
	RTTSeconds float64 `json:"rttSeconds"`
	Suspect    bool    `json:"suspect,omitempty"`
	// Inferred counts the flows whose hop here was inferred, not heard.
	Inferred int `json:"inferred,omitempty"`
}

// traceSusp is one hop address where lossy flows' breaks start, with the
// evidence: how that hop answered, and how the destination answered.
type traceSusp struct {
	Address     string   `json:"address"`
	SourcePorts []uint16 `json:"sourcePorts"`
	HopSent     int      `json:"hopSent"`
	HopReceived int      `json:"hopReceived"`
	HopLoss     float64  `json:"hopLoss"`
	EndSent     int      `json:"endToEndSent"`
	EndReceived int      `json:"endToEndReceived"`
	EndLoss     float64  `json:"endToEndLoss"`
}

func newTraceReport(host string, dst, src netip.Addr, port uint16, cfg probe.TraceConfig, mcfg matrix.Config, fts []probe.FlowTrace, took time.Duration) (traceReport, error) {
	rep := traceReport{
		Host: host, Target: dst.String(), Port: port, Source: src.String(), Flows: len(fts),
		ProbesPerHop: cfg.Probes, DurationSeconds: took.Seconds(), Paths: []tracePath{}, Suspects: []traceSusp{}, FlowList: []traceFlow{},
		Inferred: []matrix.FlowSuspect{},
	}
	suspects := map[string]*traceSusp{}
	// Flows whose every hop answered make the paths; a flow with silent
	// hops joins the one path it fits, or stands alone when it fits none
	// or several.
	complete := func(ft probe.FlowTrace) bool { return !slices.Contains(ft.Path(), "") }
	ordered := slices.Concat(
		slices.DeleteFunc(slices.Clone(fts), func(ft probe.FlowTrace) bool { return !complete(ft) }),
		slices.DeleteFunc(slices.Clone(fts), complete))
	for _, ft := range ordered {
		addrs := ft.Path()
		lr := ft.Loss(probe.DefaultNoise)
		tf := traceFlow{SourcePort: ft.SourcePort, Hops: addrs, Reached: ft.Reached,
			Sent: ft.Sent, Received: ft.Received, Lossy: lr.Lossy, SuspectHop: lr.SuspectHop}
		for _, h := range ft.Hops {
			if h.Inferred {
				tf.InferredTTLs = append(tf.InferredTTLs, h.TTL)
			}
		}
		rep.FlowList = append(rep.FlowList, tf)
		i, fits := -1, 0
		for j, p := range rep.Paths {
			if slices.Equal(p.addrs, addrs) || !complete(ft) && probe.SamePath(p.addrs, addrs) {
				i, fits = j, fits+1
			}
		}
		if fits != 1 {
			i = -1
		}
		if i < 0 {
			rep.Paths = append(rep.Paths, tracePath{addrs: addrs, Hops: make([]traceHop, len(addrs)), SuspectHop: -1, Reached: ft.Reached})
			i = len(rep.Paths) - 1
		}
		p := &rep.Paths[i]
		p.addrs = probe.MergePath(p.addrs, addrs)
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
			s = &traceSusp{Address: key}
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
		p.Hash = probe.PathHash(p.addrs)
		p.Loss = ratio(p.Sent, p.Received)
		for j := range p.Hops {
			p.Hops[j].Address = p.addrs[j]
			p.Hops[j].Loss = ratio(p.Hops[j].Sent, p.Hops[j].Received)
			p.Hops[j].Suspect = j == p.SuspectHop
		}
	}
	slices.SortStableFunc(rep.Paths, func(a, b tracePath) int { return len(b.SourcePorts) - len(a.SourcePorts) })
	for _, s := range suspects {
		s.HopLoss = ratio(s.HopSent, s.HopReceived)
		s.EndLoss = ratio(s.EndSent, s.EndReceived)
		rep.Suspects = append(rep.Suspects, *s)
	}
	slices.SortFunc(rep.Suspects, func(a, b traceSusp) int { return len(b.SourcePorts) - len(a.SourcePorts) })
	slices.SortFunc(rep.FlowList, func(a, b traceFlow) int { return int(a.SourcePort) - int(b.SourcePort) })
	v, err := inferSuspects(dst, src, mcfg, fts)
	if err != nil {
		return rep, err
	}
	rep.Inferred = append(rep.Inferred, v.Suspects...)
	rep.Unlocated = v.Unlocated
	return rep, nil
}

// inferSuspects runs the matrix's localization over the flows, as if the
// tracing host were an agent that had probed them: one algorithm for the
// matrix and the trace.
func inferSuspects(dst, src netip.Addr, mcfg matrix.Config, fts []probe.FlowTrace) (matrix.FlowsVerdict, error) {
	tcp := api.Protocol{Protocol: api.ProtocolTCPSYN}
	lossy := false
	gw := sharedFirstHop(fts)
	for _, ft := range fts {
		hops := ft.Path()
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
		tcp.Flows = append(tcp.Flows, api.Flow{SourcePort: ft.SourcePort, Stats: st, Path: &api.FlowPath{Hops: hops, SuspectHop: -1}})
		tcp.Sent += st.Sent
		tcp.Lost += st.Lost
		lossy = lossy || probe.DefaultNoise.Lossy(ft.Sent, ft.Sent-ft.Received)
	}
	if !lossy {
		return matrix.FlowsVerdict{}, nil
	}
	agent := api.Agent{Name: src.String(), Class: api.ClassNode, Address: src.String()}
	target := api.Target{Name: dst.String(), Address: dst.String(), Class: api.ClassNode, Path: api.PathNodeToNode, Protocols: []api.Protocol{tcp}}
	return matrix.LocalizeFlows(mcfg, agent, target, func(s api.Stats) bool {
		return probe.DefaultNoise.Lossy(int(s.Sent), int(s.Lost))
	}, time.Now())
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

func (r traceReport) print(w io.Writer) {
	fmt.Fprintf(w, "trace to %s (%s) port %d from %s: %d flows, %d probes per hop, %d distinct paths, %s\n",
		r.Host, r.Target, r.Port, r.Source, r.Flows, r.ProbesPerHop, len(r.Paths), time.Duration(r.DurationSeconds*float64(time.Second)).Round(time.Millisecond))
	for i, p := range r.Paths {
		mark := ""
		if len(p.LossyPorts) > 0 {
			mark = fmt.Sprintf("  LOSSY: %d of %d flows", len(p.LossyPorts), len(p.SourcePorts))
		}
		fmt.Fprintf(w, "\npath %d (%s): %d flows, end-to-end %d/%d answered, loss %s%s\n", i+1, p.Hash[:8], len(p.SourcePorts), p.Received, p.Sent, pct(p.Loss), mark)
		fmt.Fprintf(w, "  source ports: %s\n", ports(p.SourcePorts))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  TTL\tADDRESS\tSENT\tRECV\tLOSS\tRTT\t")
		for _, h := range p.Hops {
			addr := h.Address
			if addr == "" {
				addr = "*"
			}
			note := ""
			switch {
			case h.Suspect:
				note = "<- SUSPECT: loss starts after this hop"
			case h.Inferred > 0:
				note = fmt.Sprintf("(inferred for %d of %d flows)", h.Inferred, len(p.SourcePorts))
			}
			fmt.Fprintf(tw, "  %d\t%s\t%d\t%d\t%s\t%s\t%s\n", h.TTL, addr, h.Sent, h.Received, pct(h.Loss), rtt(h.RTTSeconds), note)
		}
		tw.Flush()
		if !p.Reached {
			fmt.Fprintln(w, "  (destination not reached)")
		}
	}
	if len(r.Suspects)+len(r.Inferred) == 0 && r.Unlocated == nil {
		fmt.Fprintln(w, "\nno suspects: no flow lost more than noise end to end (silent or lossy middle hops alone are ICMP rate limiting, see docs/trace.md)")
		return
	}
	if len(r.Suspects) > 0 {
		fmt.Fprintln(w, "\nsuspects (loss starts after these hops):")
		for _, s := range r.Suspects {
			fmt.Fprintf(w, "  %s: %d flows (%s); hop answered %d/%d, end to end %d/%d (%s loss)\n",
				s.Address, len(s.SourcePorts), ports(s.SourcePorts), s.HopReceived, s.HopSent, s.EndReceived, s.EndSent, pct(s.EndLoss))
		}
	}
	r.printInferred(w)
}

// printInferred prints the suspects named from the flows, those that the
// same flows cross on one line.
func (r traceReport) printInferred(w io.Writer) {
	if len(r.Inferred) > 0 {
		fmt.Fprintln(w, "\ninferred from the flows (lossy flows cross these and clean flows avoid them; no hop needs to answer):")
	}
	done := make([]bool, len(r.Inferred))
	for i, s := range r.Inferred {
		if done[i] {
			continue
		}
		var same []string
		for j := i + 1; j < len(r.Inferred); j++ {
			o := r.Inferred[j]
			if !done[j] && slices.Equal(o.Through, s.Through) && slices.Equal(o.Unknown, s.Unknown) {
				done[j] = true
				same = append(same, o.Kind+" "+o.Name)
			}
		}
		name := s.Kind + " " + s.Name
		if addrs := strings.Join(s.Addresses, ","); addrs != s.Name && addrs != "" {
			name += " (" + addrs + ")"
		}
		fmt.Fprintf(w, "  %s: score %.2f; %d flows cross it (%s), %d lossy, %d/%d lost (%s); %d flows avoid it, %d/%d lost\n",
			name, s.Score, len(s.Through), ports(s.Through), len(s.Lossy),
			s.Lost, s.Sent, pct(ratio(int(s.Sent), int(s.Sent-s.Lost))), r.Flows-len(s.Through)-len(s.Unknown), s.AvoidLost, s.AvoidSent)
		if len(s.Unknown) > 0 {
			fmt.Fprintf(w, "    %d flows may cross it too (a hop of theirs was silent): %s\n", len(s.Unknown), ports(s.Unknown))
		}
		if len(same) > 0 {
			fmt.Fprintf(w, "    the same flows cross %s: from this host they cannot be told apart\n", strings.Join(same, ", "))
		}
	}
	if u := r.Unlocated; u != nil {
		where := "past the source"
		if u.Past != "" {
			where = fmt.Sprintf("past hop %d (%s)", u.PastTTL, u.Past)
		}
		fmt.Fprintf(w, "\nunlocated: %d lossy flows (%s) lost %d/%d %s; no hop past it answered to tell their paths from the %d clean flows' (trace again with more --probes or --retries, or from another host)\n",
			len(u.Lossy), ports(u.Lossy), u.Lost, u.Sent, where, u.Clean)
	}
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + "%" }

func rtt(s float64) string {
	if s == 0 {
		return "-"
	}
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
}

func ports(ps []uint16) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}
