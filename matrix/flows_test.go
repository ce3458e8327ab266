package matrix

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/netprober/prober/api"
)

// traceFlows is one host's trace to 198.18.2.11 across three spines: flow
// i crosses spine i%3+1, and the flows through spine2 lose 3 of 10. The
// routers answer from the inbound interface, so the far ToR's address
// names the spine the flow came through. silent blanks hops: 1, the spine
// of every other flow; 2, everything past the first hop.
func traceFlows(silent int, lost func(spine int) uint64) api.Target {
	var flows []api.Flow
	var sent, lostAll uint64
	for i := range 16 {
		sp := i%3 + 1
		hops := []string{"198.18.1.1", fmt.Sprintf("198.18.10.%d", sp), fmt.Sprintf("198.18.2.%d", sp), "198.18.2.11"}
		if silent >= 1 && i%2 == 0 {
			hops[1] = ""
		}
		if silent >= 2 {
			hops[1], hops[2] = "", ""
		}
		l := lost(sp)
		flows = append(flows, api.Flow{SourcePort: uint16(62000 + i), Stats: api.Stats{Sent: 10, Lost: l}, Path: &api.FlowPath{Hops: hops, SuspectHop: -1}})
		sent += 10
		lostAll += l
	}
	return api.Target{Name: "198.18.2.11", Address: "198.18.2.11", Class: "node", Path: "node_to_node",
		Protocols: []api.Protocol{{Protocol: "tcp_syn", Stats: api.Stats{Sent: sent, Lost: lostAll}, Flows: flows}}}
}

var traceNames = map[string]string{"198.18.1.1/32": "tor1", "198.18.2.0/29": "tor2", "198.18.10.1/32": "spine1", "198.18.10.2/32": "spine2", "198.18.10.3/32": "spine3"}

func TestLocalizeFlows(t *testing.T) {
	src := api.Agent{Name: "198.18.1.11", Class: "node", Address: "198.18.1.11"}
	lossy := func(s api.Stats) bool { return s.Lost >= 2 }
	spine2 := func(sp int) uint64 {
		if sp == 2 {
			return 3
		}
		return 0
	}
	lossyPorts := []uint16{62001, 62004, 62007, 62010, 62013}
	for _, tc := range []struct {
		name   string
		names  map[string]string
		silent int
		lost   func(int) uint64
		// allowed are the suspects that may be named, want those that
		// must be; past is the Unlocated hop, "" for none.
		allowed, want []string
		past          string
	}{
		{name: "named", names: traceNames, lost: spine2,
			allowed: []string{"device spine2", "link tor1->spine2", "link spine2->tor2"}, want: []string{"device spine2"}},
		// Unnamed, the far ToR's address on the lossy link is a hop of
		// its own; the hops every flow crosses are never named.
		{name: "addresses", lost: spine2,
			allowed: []string{"device 198.18.10.2", "device 198.18.2.2", "link 198.18.1.1->198.18.10.2", "link 198.18.10.2->198.18.2.2", "link 198.18.2.2->198.18.2.11"},
			want:    []string{"device 198.18.10.2"}},
		{name: "half the spines silent", names: traceNames, silent: 1, lost: spine2,
			allowed: []string{"device spine2", "link tor1->spine2", "link spine2->tor2"}, want: []string{"device spine2"}},
		{name: "silent past the first hop", names: traceNames, silent: 2, lost: spine2, past: "198.18.1.1"},
		{name: "clean", names: traceNames, lost: func(int) uint64 { return 0 }},
		// A first hop that drops a share of every flow is named: its
		// flows do not split into clean and lossy beyond chance.
		{name: "every flow alike", names: traceNames, lost: func(sp int) uint64 { return uint64(sp%2 + 1) },
			allowed: []string{"device tor1", "host 198.18.1.11", "link 198.18.1.11->tor1", "device tor2", "host 198.18.2.11", "link tor2->198.18.2.11"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := LocalizeFlows(Config{Hops: tc.names}, src, traceFlows(tc.silent, tc.lost), lossy, time.Unix(1e9, 0))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range v.Suspects {
				name := s.Kind + " " + s.Name
				got = append(got, name)
				t.Logf("%s score %.2f through %v lossy %v unknown %v avoiding %d/%d", name, s.Score, s.Through, s.Lossy, s.Unknown, s.AvoidLost, s.AvoidSent)
				if !slices.Contains(tc.allowed, name) {
					t.Errorf("suspect %s, want only %v", name, tc.allowed)
				}
				if tc.name == "every flow alike" {
					continue
				}
				if s.AvoidLost != 0 || len(s.Lossy) != len(s.Through) || len(s.Lossy) == 0 {
					t.Errorf("%s: %d lost by the flows avoiding it, %d of %d flows through it lossy; want 0 and all", name, s.AvoidLost, len(s.Lossy), len(s.Through))
				}
				for _, p := range s.Lossy {
					if !slices.Contains(lossyPorts, p) {
						t.Errorf("%s: flow %d through it, which crossed another spine", name, p)
					}
				}
			}
			if tc.allowed != nil && len(got) == 0 {
				t.Errorf("no suspect, want one of %v", tc.allowed)
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("suspects %v, want %s among them", got, w)
				}
			}
			switch u := v.Unlocated; {
			case tc.past == "" && u != nil:
				t.Errorf("unlocated %+v, want none", *u)
			case tc.past != "" && (u == nil || u.Past != tc.past || u.PastTTL != 1 || !slices.Equal(u.Lossy, lossyPorts) || u.Clean != 11 || u.Lost != 15):
				t.Errorf("unlocated %+v, want past %s at TTL 1, flows %v lossy, 11 clean, 15 lost", u, tc.past, lossyPorts)
			}
		})
	}
	if _, err := LocalizeFlows(Config{}, src, api.Target{Name: "x"}, lossy, time.Unix(1e9, 0)); err == nil {
		t.Error("a target without a protocol was accepted")
	}
}
