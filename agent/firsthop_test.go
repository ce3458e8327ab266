package agent

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/netprober/prober/api"
	"time"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		var a netip.Addr
		if s != "" {
			a = netip.MustParseAddr(s)
		}
		out = append(out, a)
	}
	return out
}

func TestFirstHop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		gws  []netip.Addr
		dflt string
		want string
	}{
		{"rack-mates on-link, other racks via the ToR", addrs("", "", "192.0.2.1", "192.0.2.1", "192.0.2.1"), "", "192.0.2.1"},
		{"the most common gateway", addrs("198.51.100.1", "192.0.2.1", "192.0.2.1"), "203.0.113.1", "192.0.2.1"},
		{"a tie takes the lowest address", addrs("198.51.100.1", "192.0.2.1"), "", "192.0.2.1"},
		{"every target on-link: the default route's", addrs("", ""), "203.0.113.1", "203.0.113.1"},
		{"no targets: the default route's", nil, "203.0.113.1", "203.0.113.1"},
		{"nothing says", addrs(""), "", ""},
		{"IPv6", addrs("2001:db8::1", "2001:db8::1", "2001:db8::2"), "", "2001:db8::1"},
		{"link-local gateways name no router", addrs("fe80::1", "fe80::1", "2001:db8::2"), "fe80::1", "2001:db8::2"},
		{"only link-local", addrs("fe80::1"), "fe80::1", ""},
		{"IPv4 link-local (Calico's pod gateway)", addrs("169.254.1.1"), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dflt netip.Addr
			if tc.dflt != "" {
				dflt = netip.MustParseAddr(tc.dflt)
			}
			if got := addrString(firstHop(tc.gws, dflt)); got != tc.want {
				t.Errorf("firstHop(%v, %v) = %q, want %q", tc.gws, tc.dflt, got, tc.want)
			}
		})
	}
}

func TestFirstHopTargets(t *testing.T) {
	t.Parallel()
	ts := map[targetKey]*target{}
	add := func(name, class, addr string) {
		tg := Target{Name: name, Class: class, Addr: netip.MustParseAddr(addr)}
		ts[tg.key()] = &target{Target: tg}
	}
	add("vip", "lb", "203.0.113.10")
	add("p1", "pod", "198.51.100.7")
	add("p1", "pod", "2001:db8::7") // the other family's routes say nothing
	if got := firstHopTargets(ts, api.FamilyIPv4); len(got) != 2 {
		t.Errorf("no node targets: %v, want every target's address", got)
	}
	for i := range 200 {
		add(fmt.Sprintf("n%03d", i), "node", fmt.Sprintf("192.0.2.%d", i))
	}
	got := firstHopTargets(ts, api.FamilyIPv4)
	if len(got) != firstHopSample {
		t.Fatalf("200 node targets: %d addresses, want %d", len(got), firstHopSample)
	}
	seen := map[netip.Addr]bool{}
	for _, a := range got {
		if !a.Is4() || a.As4()[0] != 192 || seen[a] {
			t.Errorf("sampled %v: want distinct node targets only", a)
		}
		seen[a] = true
	}
	if got[0] != netip.MustParseAddr("192.0.2.0") || got[len(got)-1].As4()[3] < 190 {
		t.Errorf("sample %v..%v: want it spread over all the targets", got[0], got[len(got)-1])
	}
}

// TestAgentReportsFirstHop: the agent reports the first hop its routes
// say, and looks again when its targets change. The routes are stubbed;
// the targets are RFC 5737 addresses that nothing probes (http2: none).
func TestAgentReportsFirstHop(t *testing.T) {
	var mu sync.Mutex
	via := map[netip.Addr]netip.Addr{
		netip.MustParseAddr("192.0.2.11"): {}, // a rack-mate, on-link
		netip.MustParseAddr("192.0.2.21"): netip.MustParseAddr("192.0.2.1"),
		netip.MustParseAddr("192.0.2.31"): netip.MustParseAddr("192.0.2.1"),
	}
	a, base := loopbackAgentWith(t, `
name: lo1
class: node
listen: 127.0.0.1:0
probing: {protocols: [http2_ping], maxTargets: 8}
targets:
  - {name: n11, address: 192.0.2.11, class: node, port: 9, http2: none}
  - {name: n21, address: 192.0.2.21, class: node, port: 9, http2: none}
  - {name: n31, address: 192.0.2.31, class: node, port: 9, http2: none}
`, func(a *Agent) {
		a.routes = func(_ netip.Addr, dsts []netip.Addr) ([]netip.Addr, netip.Addr, error) {
			mu.Lock()
			defer mu.Unlock()
			var gws []netip.Addr
			for _, d := range dsts {
				gws = append(gws, via[d])
			}
			return gws, netip.MustParseAddr("203.0.113.1"), nil
		}
	})
	waitHop := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		var got string
		for time.Now().Before(deadline) {
			if got = getObservations(t, base).Agent.FirstHop; got == want {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("agent.firstHop %q, want %q", got, want)
	}
	waitHop("192.0.2.1")
	// Recabled: the routes now go via another router, seen as soon as
	// the targets change, not a minute later.
	mu.Lock()
	via[netip.MustParseAddr("192.0.2.41")] = netip.MustParseAddr("198.51.100.1")
	via[netip.MustParseAddr("192.0.2.51")] = netip.MustParseAddr("198.51.100.1")
	via[netip.MustParseAddr("192.0.2.21")] = netip.MustParseAddr("198.51.100.1")
	mu.Unlock()
	ts := slices.Clone(a.cfg.Targets)
	ts = append(ts, Target{Name: "n41", Addr: netip.MustParseAddr("192.0.2.41"), Class: "node", Port: 9},
		Target{Name: "n51", Addr: netip.MustParseAddr("192.0.2.51"), Class: "node", Port: 9})
	if err := a.SetTargets(context.Background(), ts); err != nil {
		t.Fatal(err)
	}
	waitHop("198.51.100.1")
}
