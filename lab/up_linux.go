package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Up builds the fabric spec describes (after SetDefaults and Validate),
// persists its inventory and returns it. On any error it tears down what
// it made. It refuses to build over namespaces that already carry the
// prefix: run Down first. logger may be nil.
func Up(ctx context.Context, spec Spec, logger *slog.Logger) (*Fabric, error) {
	logger = orDiscard(logger)
	spec.SetDefaults()
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("lab spec: %w", err)
	}
	if err := NeedNetAdmin(); err != nil {
		return nil, err
	}
	if left, err := listNS(spec.Prefix); err != nil {
		return nil, fmt.Errorf("lab %s: %w", spec.Prefix, err)
	} else if len(left) > 0 {
		return nil, fmt.Errorf("lab %s: %d namespaces with this prefix exist (%s, ...): run 'prober lab down --prefix %s' first",
			spec.Prefix, len(left), left[0], spec.Prefix)
	}
	start := time.Now()
	p := newPlan(spec)
	b := &builder{plan: p, handles: map[string]*netlink.Handle{}, fds: map[string]netns.NsHandle{}}
	err := b.build(ctx)
	b.close()
	if err != nil {
		if derr := Down(spec.Prefix); derr != nil {
			err = errors.Join(err, fmt.Errorf("tear down: %w", derr))
		}
		return nil, fmt.Errorf("lab %s: up: %w", spec.Prefix, err)
	}
	f := p.fabric
	f.logger, f.holds = logger, &holdSet{}
	if err := f.save(); err != nil {
		return nil, errors.Join(err, Down(spec.Prefix))
	}
	logger.Info("lab up", "prefix", spec.Prefix, "namespaces", len(p.ns), "links", len(p.links),
		"routes", len(p.routes), "took", time.Since(start).Round(time.Millisecond))
	return f, nil
}

type builder struct {
	plan    *plan
	handles map[string]*netlink.Handle
	fds     map[string]netns.NsHandle
}

func (b *builder) close() {
	for _, h := range b.handles {
		h.Close()
	}
	for _, fd := range b.fds {
		fd.Close()
	}
}

func (b *builder) build(ctx context.Context) error {
	for i, n := range b.plan.ns {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := createNS(n.name, sysctlsFor(n.kind, i, b.plan.fabric.Spec)); err != nil {
			return err
		}
		fd, err := netns.GetFromName(n.name)
		if err != nil {
			return fmt.Errorf("netns %s: %w", n.name, err)
		}
		b.fds[n.name] = fd
		h, err := netlink.NewHandleAt(fd)
		if err != nil {
			return fmt.Errorf("netns %s: netlink: %w", n.name, err)
		}
		b.handles[n.name] = h
		if err := b.up(n.name, "lo"); err != nil {
			return err
		}
	}
	for _, br := range b.plan.bridges {
		if err := b.handles[br.ns].LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: br.dev}}); err != nil {
			return fmt.Errorf("netns %s: bridge %s: %w", br.ns, br.dev, err)
		}
	}
	for _, v := range b.plan.vxlans {
		if err := b.vxlan(v); err != nil {
			return err
		}
	}
	for _, a := range b.plan.addrs {
		if err := b.addr(a.ns, a.dev, a.addr); err != nil {
			return err
		}
		if err := b.up(a.ns, a.dev); err != nil {
			return err
		}
	}
	for _, l := range b.plan.links {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.link(l); err != nil {
			return err
		}
	}
	for _, r := range b.plan.routes {
		if err := b.route(r); err != nil {
			return err
		}
	}
	for _, n := range b.plan.neighs {
		if err := b.neigh(n); err != nil {
			return err
		}
	}
	if b.plan.fabric.Spec.LB {
		if err := b.lb(); err != nil {
			return err
		}
	}
	if err := b.filters(); err != nil {
		return err
	}
	return b.waitOperUp(ctx, 5*time.Second)
}

// waitOperUp waits until every link is operationally up. The kernel's
// linkwatch turns a new veth's carrier on in batches up to a second
// apart, and until then the device's queue is the noop qdisc, which drops
// every packet: a fabric returned earlier loses its first pings.
func (b *builder) waitOperUp(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var down []string
		for _, n := range b.plan.ns {
			links, err := b.handles[n.name].LinkList()
			if err != nil {
				return fmt.Errorf("netns %s: links: %w", n.name, err)
			}
			for _, l := range links {
				a := l.Attrs()
				// A VXLAN device, like lo, reports no carrier: unknown.
				if a.Name != "lo" && a.OperState != netlink.OperUp && !(l.Type() == "vxlan" && a.OperState == netlink.OperUnknown) {
					down = append(down, n.name+"/"+a.Name)
				}
			}
		}
		if len(down) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("links not up after %v: %v", limit, down)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (b *builder) byName(ns, dev string) (netlink.Link, error) {
	l, err := b.handles[ns].LinkByName(dev)
	if err != nil {
		return nil, fmt.Errorf("netns %s: link %s: %w", ns, dev, err)
	}
	return l, nil
}

func (b *builder) up(ns, dev string) error {
	l, err := b.byName(ns, dev)
	if err != nil {
		return err
	}
	if err := b.handles[ns].LinkSetUp(l); err != nil {
		return fmt.Errorf("netns %s: link %s up: %w", ns, dev, err)
	}
	return nil
}

func (b *builder) addr(ns, dev string, p netip.Prefix) error {
	l, err := b.byName(ns, dev)
	if err != nil {
		return err
	}
	if err := b.handles[ns].AddrAdd(l, &netlink.Addr{IPNet: ipNet(p), Flags: addrFlags(p)}); err != nil {
		return fmt.Errorf("netns %s: %s addr %s: %w", ns, dev, p, err)
	}
	return nil
}

// addrFlags: an IPv6 address is usable at once, without the second of
// duplicate address detection (the plan numbers every address once); a
// single-address one gets no prefix route, as an IPv4 /32 gets none.
func addrFlags(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 0
	}
	flags := unix.IFA_F_NODAD
	if p.IsSingleIP() {
		flags |= unix.IFA_F_NOPREFIXROUTE
	}
	return flags
}

func (b *builder) link(l linkPlan) error {
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: l.a.dev},
		PeerName:      l.b.dev,
		PeerNamespace: netlink.NsFd(b.fds[l.b.ns]),
	}
	if err := b.handles[l.a.ns].LinkAdd(veth); err != nil {
		return fmt.Errorf("netns %s: veth %s <-> %s %s: %w", l.a.ns, l.a.dev, l.b.ns, l.b.dev, err)
	}
	for _, e := range []linkEnd{l.a, l.b} {
		if e.master != "" {
			dev, err := b.byName(e.ns, e.dev)
			if err != nil {
				return err
			}
			br, err := b.byName(e.ns, e.master)
			if err != nil {
				return err
			}
			if err := b.handles[e.ns].LinkSetMaster(dev, br); err != nil {
				return fmt.Errorf("netns %s: %s master %s: %w", e.ns, e.dev, e.master, err)
			}
		}
		if e.mtu > 0 {
			dev, err := b.byName(e.ns, e.dev)
			if err != nil {
				return err
			}
			if err := b.handles[e.ns].LinkSetMTU(dev, e.mtu); err != nil {
				return fmt.Errorf("netns %s: %s mtu %d: %w", e.ns, e.dev, e.mtu, err)
			}
		}
		for _, a := range e.addrs {
			if err := b.addr(e.ns, e.dev, a); err != nil {
				return err
			}
		}
		if err := b.up(e.ns, e.dev); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) route(r routePlan) error {
	rt := &netlink.Route{Dst: ipNet(r.dst)}
	if len(r.via) == 1 {
		l, err := b.byName(r.ns, r.via[0].dev)
		if err != nil {
			return err
		}
		rt.LinkIndex = l.Attrs().Index
		if r.via[0].gw.IsValid() {
			rt.Gw = net.IP(r.via[0].gw.AsSlice())
		} else if r.dst.Addr().Is4() {
			rt.Scope = netlink.SCOPE_LINK // IPv6 routes have no scope
		}
	} else {
		for _, nh := range r.via {
			l, err := b.byName(r.ns, nh.dev)
			if err != nil {
				return err
			}
			rt.MultiPath = append(rt.MultiPath, &netlink.NexthopInfo{LinkIndex: l.Attrs().Index, Gw: net.IP(nh.gw.AsSlice())})
		}
	}
	if r.onlink {
		rt.Flags = int(netlink.FLAG_ONLINK)
	}
	if err := b.handles[r.ns].RouteAdd(rt); err != nil {
		return fmt.Errorf("netns %s: route %s via %v: %w", r.ns, r.dst, r.via, err)
	}
	return nil
}

// vxlan creates a node's overlay device: no learning, its peers all in
// static entries (neigh), as flannel's vxlan backend.
func (b *builder) vxlan(v vxlanPlan) error {
	dev := &netlink.Vxlan{
		LinkAttrs: netlink.LinkAttrs{Name: v.dev, MTU: OverlayMTU, HardwareAddr: v.mac},
		VxlanId:   overlayVNI, SrcAddr: net.IP(v.local.AsSlice()), Port: overlayPort,
	}
	if err := b.handles[v.ns].LinkAdd(dev); err != nil {
		return fmt.Errorf("netns %s: vxlan %s: %w", v.ns, v.dev, err)
	}
	return nil
}

// neigh adds a permanent neighbour or FDB entry on an overlay device.
func (b *builder) neigh(n neighPlan) error {
	l, err := b.byName(n.ns, n.dev)
	if err != nil {
		return err
	}
	e := &netlink.Neigh{LinkIndex: l.Attrs().Index, State: netlink.NUD_PERMANENT, IP: net.IP(n.ip.AsSlice()), HardwareAddr: n.mac}
	if n.fdb {
		e.Family, e.Flags = unix.AF_BRIDGE, netlink.NTF_SELF
		err = b.handles[n.ns].NeighAppend(e)
	} else {
		err = b.handles[n.ns].NeighSet(e)
	}
	if err != nil {
		return fmt.Errorf("netns %s: %s neighbour %s at %s (fdb %v): %w", n.ns, n.dev, n.ip, n.mac, n.fdb, err)
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
