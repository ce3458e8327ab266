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

	"github.com/netprober/prober/probe"
)

// traceReport is what `prober trace` prints: flows grouped by path, and
// the hops where a lossy flow's break starts.
type traceReport struct {
	Host            string            `json:"host"`
	Target          string            `json:"target"`
	Port            uint16            `json:"port"`
	Source          string            `json:"source"`
	Flows           int               `json:"flowCount"`
	ProbesPerHop    int               `json:"probesPerHop"`
	DurationSeconds float64           `json:"durationSeconds"`
	Paths           []tracePath       `json:"paths"`
	Suspects        []traceSusp       `json:"suspects"`
	FlowList        []traceFlow       `json:"flows"`
	Unmatched       map[string]uint64 `json:"unmatched,omitempty"`
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

func newTraceReport(host string, dst, src netip.Addr, port uint16, cfg probe.TraceConfig, fts []probe.FlowTrace, took time.Duration) traceReport {
	rep := traceReport{
		Host: host, Target: dst.String(), Port: port, Source: src.String(), Flows: len(fts),
		ProbesPerHop: cfg.Probes, DurationSeconds: took.Seconds(), Paths: []tracePath{}, Suspects: []traceSusp{}, FlowList: []traceFlow{},
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
	return rep
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
	if len(r.Suspects) == 0 {
		fmt.Fprintln(w, "\nno suspects: no flow lost more than noise end to end (silent or lossy middle hops alone are ICMP rate limiting, see docs/trace.md)")
		return
	}
	fmt.Fprintln(w, "\nsuspects (loss starts after these hops):")
	for _, s := range r.Suspects {
		fmt.Fprintf(w, "  %s: %d flows (%s); hop answered %d/%d, end to end %d/%d (%s loss)\n",
			s.Address, len(s.SourcePorts), ports(s.SourcePorts), s.HopReceived, s.HopSent, s.EndReceived, s.EndSent, pct(s.EndLoss))
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
