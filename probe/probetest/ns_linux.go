package probetest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netprober/prober/lab"
)

// NS is a network namespace a test made, for the engines' tests that need
// a router or a lossy path and not only a loopback. It is anonymous: no
// name under /run/netns pins it, so it is gone when the test closes its
// handle and sockets, and with the test process if that dies first.
// Nothing of it touches the machine's own namespaces.
type NS struct {
	Name string // for messages only
	h    netns.NsHandle
	nl   *netlink.Handle
}

// Lab address ranges: a test may number its namespaces only from these
// (docs: "Network safety"), so nothing it sends could reach a real host.
var labPrefixes = []netip.Prefix{
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("2001:2::/48"), // RFC 5180, benchmarking
}

// InLab reports whether a is in the lab's ranges.
func InLab(a netip.Addr) bool {
	for _, p := range labPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// NeedRoot skips a test that makes namespaces when the process is not
// root, or under -short, as the lab's tests do.
func NeedRoot(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds network namespaces: skipped under -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN, CAP_NET_RAW) for network namespaces and raw sockets; CI runs as root")
	}
}

// NewNS makes a network namespace with its loopback up, IPv6 router
// advertisements ignored and no duplicate address detection, removed
// when the test ends.
func NewNS(t testing.TB, name string) *NS {
	t.Helper()
	NeedRoot(t)
	n := &NS{Name: name, h: netns.None()}
	err := lab.OnLockedThread(func() error {
		h, err := netns.New() // leaves this thread in the new namespace
		if err != nil {
			return err
		}
		n.h = h
		// Without duplicate address detection a link's link-local
		// address is usable at once: a router sends its neighbour
		// solicitations for what it forwards from that address, and
		// none while it is tentative (a second or two).
		return errors.Join(
			writeSysctl("net.ipv6.conf.all.accept_ra", "0"),
			writeSysctl("net.ipv6.conf.default.accept_ra", "0"),
			writeSysctl("net.ipv6.conf.all.accept_dad", "0"),
			writeSysctl("net.ipv6.conf.default.accept_dad", "0"),
		)
	})
	if n.h.IsOpen() {
		t.Cleanup(func() { n.h.Close() })
	}
	if err != nil {
		t.Fatalf("netns %s: %v", name, err)
	}
	if n.nl, err = netlink.NewHandleAt(n.h); err != nil {
		t.Fatalf("netns %s: netlink: %v", name, err)
	}
	t.Cleanup(n.nl.Close)
	lo, err := n.nl.LinkByName("lo")
	if err == nil {
		err = n.nl.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("netns %s: loopback: %v", name, err)
	}
	return n
}

// Do runs f on an OS thread inside n. Sockets f opens stay in n for their
// whole life and may be used from any goroutine afterwards; goroutines f
// starts run outside n.
func (n *NS) Do(f func() error) error {
	return lab.OnLockedThread(func() error {
		if err := netns.Set(n.h); err != nil {
			return fmt.Errorf("netns %s: enter: %w", n.Name, err)
		}
		return f()
	})
}

// Sysctl sets key (such as "net.ipv6.conf.all.forwarding") inside n.
func (n *NS) Sysctl(t testing.TB, key, value string) {
	t.Helper()
	if err := n.Do(func() error { return writeSysctl(key, value) }); err != nil {
		t.Fatalf("netns %s: %v", n.Name, err)
	}
}

// Netlink is n's netlink handle, for what the helpers here do not cover.
func (n *NS) Netlink() *netlink.Handle { return n.nl }

// Connect links a and b with a veth pair named after them, up, addressed
// aAddr on a's end and bAddr on b's. The addresses must be in the lab's
// ranges; IPv6 ones skip duplicate address detection (IFA_F_NODAD), so
// they are usable at once. It returns the ends' names.
func Connect(t testing.TB, a *NS, aAddr netip.Prefix, b *NS, bAddr netip.Prefix) (aLink, bLink string) {
	t.Helper()
	for _, p := range []netip.Prefix{aAddr, bAddr} {
		if !InLab(p.Addr()) {
			t.Fatalf("connect %s-%s: %s is outside the lab's ranges %v", a.Name, b.Name, p, labPrefixes)
		}
	}
	aLink, bLink = "to-"+b.Name, "to-"+a.Name
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aLink}, PeerName: bLink, PeerNamespace: netlink.NsFd(b.h)}
	if err := a.nl.LinkAdd(veth); err != nil {
		t.Fatalf("veth %s-%s: %v", a.Name, b.Name, err)
	}
	ends := []struct {
		ns   *NS
		name string
		addr netip.Prefix
	}{{a, aLink, aAddr}, {b, bLink, bAddr}}
	for _, end := range ends {
		if err := end.ns.addrUp(end.name, end.addr); err != nil {
			t.Fatalf("netns %s: %s: %v", end.ns.Name, end.name, err)
		}
	}
	for _, end := range ends {
		if err := end.ns.awaitCarrier(end.name); err != nil {
			t.Fatalf("netns %s: %s: %v", end.ns.Name, end.name, err)
		}
	}
	return aLink, bLink
}

// awaitCarrier waits, at most 5 s, for link to carry packets. A veth
// end's carrier comes with its peer's, and the kernel gives the link a
// real queue discipline only then, in its link watch, which may wait up
// to a second: until then it drops what it is given. The link watch sets
// the operational state just before it activates the queue, hence the
// short wait after.
func (n *NS) awaitCarrier(link string) error {
	var l netlink.Link
	var err error
	for range 500 {
		if l, err = n.nl.LinkByName(link); err != nil {
			return err
		}
		if l.Attrs().OperState == netlink.OperUp {
			time.Sleep(10 * time.Millisecond)
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("no carrier after 5s (state %s)", l.Attrs().OperState)
}

func (n *NS) addrUp(link string, p netip.Prefix) error {
	l, err := n.nl.LinkByName(link)
	if err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
	if p.Addr().Is6() {
		addr.Flags = unix.IFA_F_NODAD
	}
	if err := n.nl.AddrAdd(l, addr); err != nil {
		return fmt.Errorf("address %s: %w", p, err)
	}
	return n.nl.LinkSetUp(l)
}

// Route adds a route in n to dst via gw.
func (n *NS) Route(t testing.TB, dst netip.Prefix, gw netip.Addr) {
	t.Helper()
	r := &netlink.Route{Dst: ipNet(dst), Gw: gw.AsSlice()}
	if err := n.nl.RouteAdd(r); err != nil {
		t.Fatalf("netns %s: route %s via %s: %v", n.Name, dst, gw, err)
	}
}

// Blackhole makes n drop, silently, what it sends to dst: a path that
// loses every answer. It returns a function that removes the route.
func (n *NS) Blackhole(t testing.TB, dst netip.Prefix) (remove func()) {
	t.Helper()
	r := &netlink.Route{Dst: ipNet(dst), Type: unix.RTN_BLACKHOLE}
	if dst.Addr().Is6() {
		r.Family = netlink.FAMILY_V6
	}
	if err := n.nl.RouteAdd(r); err != nil {
		t.Fatalf("netns %s: blackhole %s: %v", n.Name, dst, err)
	}
	return func() {
		if err := n.nl.RouteDel(r); err != nil {
			t.Errorf("netns %s: remove blackhole %s: %v", n.Name, dst, err)
		}
	}
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Masked().Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// writeSysctl writes a sysctl in the namespace of the calling thread:
// /proc/sys/net belongs to the namespace of the thread that opens it.
func writeSysctl(key, value string) error {
	path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}
