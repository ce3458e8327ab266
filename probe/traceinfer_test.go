package probe

import (
	"net/netip"
	"strings"
	"testing"
)

// hopList parses "a b - c": "-" is a silent hop. Addresses are RFC 5737.
func hopList(t *testing.T, s string) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	for _, f := range strings.Fields(s) {
		if f == "-" {
			out = append(out, netip.Addr{})
			continue
		}
		out = append(out, netip.MustParseAddr(f))
	}
	return out
}

func TestInferHops(t *testing.T) {
	t.Parallel()
	// A ToR (192.0.2.1), three spines answering from their links to it
	// (198.51.100.1-3), the far ToR answering from its link to each spine
	// (203.0.113.1-3).
	fabric := []string{
		"192.0.2.1 198.51.100.1 203.0.113.1",
		"192.0.2.1 198.51.100.2 203.0.113.2",
		"192.0.2.1 198.51.100.3 203.0.113.3",
	}
	for _, tc := range []struct {
		name  string
		known []string // traced with the flow, fully or partly answered
		flow  string
		want  string
	}{
		{"spine from the far ToR's link, then the ToR", fabric, "- - 203.0.113.2", "192.0.2.1 198.51.100.2 -"},
		{"far ToR from the spine: parallel lanes", fabric, "192.0.2.1 198.51.100.3 -", "- - 203.0.113.3"},
		{"chain forwards after a backward fill", fabric, "- 198.51.100.1 -", "192.0.2.1 - 203.0.113.1"},
		{"never the hop after a single device: ECMP fans out there", fabric, "192.0.2.1 - -", "- - -"},
		{"a dead lane is not given a live one's spine",
			[]string{"192.0.2.1 198.51.100.1 203.0.113.1", "192.0.2.1 198.51.100.1 203.0.113.1"}, "192.0.2.1 - -", "- - -"},
		{"a link never seen tells nothing", fabric[:2], "- - 203.0.113.3", "- - -"},
		{"far ToR answering from one address: no backward fill",
			[]string{"192.0.2.1 198.51.100.1 203.0.113.9", "192.0.2.1 198.51.100.2 203.0.113.9"}, "192.0.2.1 - 203.0.113.9", "- - -"},
		{"two of three lanes' far ToRs heard: enough to fill backwards",
			[]string{fabric[0], fabric[1], "192.0.2.1 198.51.100.3 -"}, "- - 203.0.113.1", "192.0.2.1 198.51.100.1 -"},
		{"a far ToR reached from two spines: no forward fill into it",
			[]string{"192.0.2.1 198.51.100.1 203.0.113.1", "192.0.2.1 198.51.100.2 203.0.113.1", "192.0.2.1 198.51.100.3 203.0.113.3"},
			"192.0.2.1 198.51.100.2 -", "- - -"},
		{"far ToR seen after two spines: no forward fill either",
			[]string{"192.0.2.1 198.51.100.1 203.0.113.1", "192.0.2.1 198.51.100.1 203.0.113.2", "192.0.2.1 198.51.100.2 203.0.113.3"},
			"192.0.2.1 198.51.100.1 -", "- - -"},
		{"more devices after than before: a fan-out, no forward fill",
			[]string{"192.0.2.1 198.51.100.1 203.0.113.1", "192.0.2.1 198.51.100.2 203.0.113.2", "192.0.2.1 198.51.100.2 203.0.113.4", "192.0.2.1 198.51.100.1 203.0.113.5"},
			"192.0.2.1 198.51.100.2 -", "- - -"},
		{"directions disagree: stays silent",
			[]string{"192.0.2.1 198.51.100.1 203.0.113.1 192.0.2.50", "192.0.2.2 198.51.100.2 203.0.113.2 192.0.2.60"},
			"192.0.2.1 198.51.100.1 - 192.0.2.60", "- - - -"},
		{"directions agree",
			[]string{"192.0.2.1 198.51.100.1 203.0.113.1 192.0.2.50", "192.0.2.2 198.51.100.2 203.0.113.2 192.0.2.60"},
			"192.0.2.1 198.51.100.1 - 192.0.2.50", "- - 203.0.113.1 -"},
		{"answered hops are left as they are", fabric, "192.0.2.1 198.51.100.1 203.0.113.1", "- - -"},
		{"shorter flow", fabric, "- 198.51.100.2", "192.0.2.1 -"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths := [][]netip.Addr{hopList(t, tc.flow)}
			for _, k := range tc.known {
				paths = append(paths, hopList(t, k))
			}
			got := inferHops(paths)
			if len(got) != len(paths) {
				t.Fatalf("%d results for %d flows", len(got), len(paths))
			}
			want := hopList(t, tc.want)
			if len(got[0]) != len(want) {
				t.Fatalf("inferred %v, want %v", got[0], want)
			}
			for i := range want {
				if got[0][i] != want[i] {
					t.Errorf("ttl %d: inferred %v, want %v (flow %s)", i+1, got[0][i], want[i], tc.flow)
				}
			}
		})
	}
}
