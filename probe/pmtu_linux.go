package probe

import (
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// openTooBigRaw opens the raw ICMP socket that hears path MTU
// discovery's errors for src (tooBigFilter): a sized SYN that meets a
// smaller MTU whose router says so is answered by one, quoting it. On
// IPv6 it is the only way to hear it: the kernel caches no path MTU for a
// raw socket without IPV6_RECVERR, which would turn every ICMPv6 error
// into a failed read of the SYN socket.
func openTooBigRaw(src netip.Addr) (rawSocket, error) {
	return openICMPFiltered(src, "tcp_syn pmtu", tooBigFilter)
}

// routeMTU asks the kernel's route cache, as `ip route get` shows it,
// for the path MTU learnt towards a destination: the raw socket a sized
// SYN left by is handed the ICMP "fragmentation needed" or "packet too
// big" that quotes it, and the kernel records the MTU it carries. The
// netlink socket is opened where the engine is, so it asks the engine's
// network namespace whichever thread asks.
type routeMTU struct {
	h *netlink.Handle
}

func newRouteMTU() (*routeMTU, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	// A probe asks it and the agent waits for its probes to stop: no
	// answer must hold one past a second.
	if err := h.SetSocketTimeout(time.Second); err != nil {
		h.Close()
		return nil, err
	}
	return &routeMTU{h: h}, nil
}

// get is the cached path MTU from src to dst, or 0: none cached, or not
// known.
func (r *routeMTU) get(src, dst netip.Addr) int {
	if r == nil {
		return 0
	}
	var opt *netlink.RouteGetOptions
	if src.IsValid() && !src.IsUnspecified() {
		opt = &netlink.RouteGetOptions{SrcAddr: src.AsSlice()}
	}
	rs, err := r.h.RouteGetWithOptions(dst.AsSlice(), opt)
	if err != nil || len(rs) == 0 {
		return 0
	}
	return rs[0].MTU
}

func (r *routeMTU) close() {
	if r != nil {
		r.h.Close()
	}
}
