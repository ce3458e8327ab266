package agent

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestGatewayOf(t *testing.T) {
	t.Parallel()
	ip := func(s string) net.IP { return net.ParseIP(s) }
	for _, tc := range []struct {
		name string
		r    netlink.Route
		want string
	}{
		{"via a gateway", netlink.Route{Gw: ip("192.0.2.1")}, "192.0.2.1"},
		{"on-link", netlink.Route{}, ""},
		{"multipath: the lowest next hop", netlink.Route{MultiPath: []*netlink.NexthopInfo{{Gw: ip("198.51.100.1")}, {Gw: ip("192.0.2.1")}}}, "192.0.2.1"},
		{"IPv6", netlink.Route{Gw: ip("2001:db8::1")}, "2001:db8::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := addrString(gatewayOf(tc.r)); got != tc.want {
				t.Errorf("gatewayOf(%v) = %q, want %q", tc.r, got, tc.want)
			}
		})
	}
	dflt := defaultGateway([]netlink.Route{{Gw: ip("198.51.100.1"), Priority: 200}, {}, {Gw: ip("192.0.2.1"), Priority: 100}})
	if want := netip.MustParseAddr("192.0.2.1"); dflt != want {
		t.Errorf("defaultGateway: %v, want %v (lowest metric)", dflt, want)
	}
}

// TestFirstHopRoutesLoopback asks the kernel for the route to loopback,
// which has no gateway: the lookup works unprivileged and sends nothing.
func TestFirstHopRoutesLoopback(t *testing.T) {
	t.Parallel()
	lo := netip.MustParseAddr("127.0.0.1")
	gws, _, err := firstHopRoutes(lo, []netip.Addr{lo})
	if err != nil {
		t.Fatal(err)
	}
	if len(gws) != 1 || gws[0].IsValid() {
		t.Errorf("gateways to loopback: %v, want one invalid (no gateway)", gws)
	}
}
