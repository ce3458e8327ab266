package tracereport

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Print writes the report for a person, as `prober trace` prints it.
func Print(w io.Writer, r Report) {
	size := ""
	if r.ProbeSize > 0 {
		size = fmt.Sprintf(" of %d bytes", r.ProbeSize)
	}
	fmt.Fprintf(w, "trace to %s (%s) port %d from %s: %d flows, %d probes%s per hop, %d distinct paths, %s\n",
		r.Host, r.Target, r.Port, r.Source, r.Flows, r.ProbesPerHop, size, len(r.Paths), time.Duration(r.DurationSeconds*float64(time.Second)).Round(time.Millisecond))
	for i, p := range r.Paths {
		mark := ""
		if len(p.LossyPorts) > 0 {
			mark = fmt.Sprintf("  LOSSY: %d of %d flows", len(p.LossyPorts), len(p.SourcePorts))
		}
		fmt.Fprintf(w, "\npath %d (%s): %d flows, end-to-end %d/%d answered, loss %s%s\n", i+1, p.Hash[:min(8, len(p.Hash))], len(p.SourcePorts), p.Received, p.Sent, pct(p.Loss), mark)
		fmt.Fprintf(w, "  source ports: %s\n", ports(p.SourcePorts))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  TTL\tADDRESS\tSENT\tRECV\tLOSS\tRTT\t")
		for _, h := range p.Hops {
			addr := named(h.Address, h.Name)
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
				named(s.Address, s.Name), len(s.SourcePorts), ports(s.SourcePorts), s.HopReceived, s.HopSent, s.EndReceived, s.EndSent, pct(s.EndLoss))
		}
	}
	printInferred(w, r)
}

// named is an address with the device name the matrix knows it by.
func named(addr, name string) string {
	if name == "" {
		return addr
	}
	return addr + " (" + name + ")"
}

// printInferred prints the suspects named from the flows, those that the
// same flows cross on one line.
func printInferred(w io.Writer, r Report) {
	if len(r.Inferred) > 0 {
		from := ""
		if r.WindowProbes > 0 {
			from = fmt.Sprintf(", with their %d probes of the agent's window and their earlier traces", r.WindowProbes)
		}
		fmt.Fprintf(w, "\ninferred from the flows%s (lossy flows cross these and clean flows avoid them; no hop needs to answer):\n", from)
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
