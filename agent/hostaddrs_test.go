package agent

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/netprober/prober/api"
)

func ipNet(t *testing.T, s string) net.Addr {
	t.Helper()
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	n.IP = ip
	return n
}

// TestHostAddresses: a node's tunnel endpoint and CNI gateway are listed;
// its own source, loopback, link-local and multicast are not; the list is
// sorted, without repeats, and bounded.
func TestHostAddresses(t *testing.T) {
	var ifs []net.Addr
	for _, s := range []string{"127.0.0.1/8", "192.0.2.10/24", "198.51.100.1/24", "198.51.100.0/32", "::1/128",
		"fe80::1/64", "2001:db8::5/64", "224.0.0.1/32", "198.51.100.1/24", "169.254.1.1/32"} {
		ifs = append(ifs, ipNet(t, s))
	}
	got := hostAddresses(ifs, []netip.Addr{netip.MustParseAddr("192.0.2.10")})
	if want := []string{"198.51.100.0", "198.51.100.1", "2001:db8::5"}; !slices.Equal(got, want) {
		t.Errorf("host addresses %v, want %v", got, want)
	}
	ifs = ifs[:0]
	for i := range 200 {
		ifs = append(ifs, &net.IPNet{IP: net.IPv4(198, 51, 100, byte(i)), Mask: net.CIDRMask(32, 32)})
	}
	if got := hostAddresses(ifs, nil); len(got) != api.MaxHostAddresses {
		t.Errorf("%d host addresses from 200, want at most %d", len(got), api.MaxHostAddresses)
	}
}

// TestHostAddressesReported: a node agent reports its host addresses, a
// pod agent (whose interfaces are its own) none.
func TestHostAddressesReported(t *testing.T) {
	for _, class := range []string{"node", "pod"} {
		a, _ := loopbackAgentWith(t, "name: a1\nclass: "+class+"\nlisten: 127.0.0.1:0\nprobing: {protocols: [tcp_syn]}\n", func(a *Agent) {
			a.ifAddrs = func() ([]net.Addr, error) { return []net.Addr{ipNet(t, "198.51.100.0/32")}, nil }
		})
		a.updateHostAddrs()
		got := a.Observations().Agent.HostAddresses
		if want := class == "node"; want != (len(got) == 1 && got[0] == "198.51.100.0") || !want && len(got) != 0 {
			t.Errorf("%s agent reports host addresses %v", class, got)
		}
	}
}
