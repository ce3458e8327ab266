package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/probe/probetest"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// The IPv6 tests' namespaces are numbered from 2001:2::/48 (RFC 5180),
// the lab's IPv6 range: links 2001:2:0:<n>::/64.
var (
	link1 = netip.MustParsePrefix("2001:2:0:1::/64")
	link2 = netip.MustParsePrefix("2001:2:0:2::/64")
)

// host returns address n of link p, with p's length.
func host(p netip.Prefix, n byte) netip.Prefix {
	a := p.Addr().As16()
	a[15] = n
	return netip.PrefixFrom(netip.AddrFrom16(a), p.Bits())
}

// routed is three namespaces in a line, src on link1, dst on link2 and
// a router between them, its ICMPv6 errors not rate-limited: every Time
// Exceeded must come back, since these tests check matching, not
// patience with rate limits (TestTraceFindsEverySpine does that).
type routed struct {
	src, router, dst             *probetest.NS
	srcAddr, routerAddr, dstAddr netip.Addr // routerAddr: on link1
	routerIn                     string     // the router's end of link1
}

func newRouted(t *testing.T) routed {
	t.Helper()
	r := routed{src: probetest.NewNS(t, "src"), router: probetest.NewNS(t, "rtr"), dst: probetest.NewNS(t, "dst")}
	r.router.Sysctl(t, "net.ipv6.conf.all.forwarding", "1")
	r.router.Sysctl(t, "net.ipv6.icmp.ratelimit", "0")
	r.routerIn, _ = probetest.Connect(t, r.router, host(link1, 2), r.src, host(link1, 1))
	probetest.Connect(t, r.router, host(link2, 1), r.dst, host(link2, 2))
	r.src.Route(t, netip.MustParsePrefix("::/0"), host(link1, 2).Addr())
	r.dst.Route(t, netip.MustParsePrefix("::/0"), host(link2, 1).Addr())
	r.srcAddr, r.routerAddr, r.dstAddr = host(link1, 1).Addr(), host(link1, 2).Addr(), host(link2, 2).Addr()
	return r
}

// loseAnswers makes the router drop what it forwards to src, until the
// returned function is called: a path that loses every answer, while the
// probes still arrive.
func (r routed) loseAnswers(t *testing.T) (restore func()) {
	return r.router.Blackhole(t, netip.PrefixFrom(r.srcAddr, 128))
}

// listen6 listens on addr:port in ns until the test ends.
func listen6(t *testing.T, ns *probetest.NS, addr netip.Addr, port uint16) {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		ln, err = net.Listen("tcp6", netip.AddrPortFrom(addr, port).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
}

// TestICMPv6 probes over both kinds of ICMPv6 socket: a datagram socket
// where net.ipv4.ping_group_range allows it (it governs IPv6 too), else a
// raw one. An echo whose reply is dropped on the way back is lost.
func TestICMPv6(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pingGroups string
		privileged bool
	}{{"datagram", "0 2147483647", false}, {"raw", "1 0", true}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newRouted(t)
			n.src.Sysctl(t, "net.ipv4.ping_group_range", tc.pingGroups)
			var e *ICMP
			if err := n.src.Do(func() (err error) {
				e, err = NewICMP(n.srcAddr, nil)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx) }()
			defer func() { cancel(); <-done }()
			if e.Privileged() != tc.privileged {
				t.Fatalf("privileged = %v, want %v", e.Privileged(), tc.privileged)
			}
			if tc.privileged {
				f, err := e.conn.IPv6PacketConn().ICMPFilter()
				if err != nil {
					t.Fatal(err)
				}
				if f.WillBlock(ipv6.ICMPTypeEchoReply) || !f.WillBlock(ipv6.ICMPTypeNeighborSolicitation) || !f.WillBlock(ipv6.ICMPTypeEchoRequest) {
					t.Error("raw socket's ICMP6_FILTER does not pass echo replies alone")
				}
			}
			probe := func(dst netip.Addr, want Outcome, timeout time.Duration) {
				t.Helper()
				r := e.Probe(ctx, Target{Addr: dst}, timeout)
				if r.Outcome != want || (want == OK && r.RTT <= 0) {
					t.Fatalf("echo to %s: %v rtt %v (%v), want %v", dst, r.Outcome, r.RTT, r.Err, want)
				}
			}
			for range 3 {
				probe(netip.IPv6Loopback(), OK, time.Second)
				probe(n.dstAddr, OK, time.Second)
			}
			restore := n.loseAnswers(t)
			probe(n.dstAddr, Lost, 300*time.Millisecond)
			restore()
			probe(n.dstAddr, OK, time.Second)
			if c := e.Foreign.Load() + e.Malformed.Load(); c != 0 {
				t.Errorf("%d foreign or malformed replies", c)
			}
		})
	}
}

// synRecv counts the half-open (SYN_RECV) connections to port in ns, as
// /proc/net/tcp6 of ns lists them (sock_diag through a netlink handle of
// ns would be asked in the caller's namespace).
func synRecv(t *testing.T, ns *probetest.NS, port uint16) int {
	t.Helper()
	var table []byte
	if err := ns.Do(func() (err error) {
		table, err = os.ReadFile("/proc/thread-self/net/tcp6")
		return err
	}); err != nil {
		t.Fatalf("netns %s: %v", ns.Name, err)
	}
	n := 0
	for line := range strings.Lines(string(table)) {
		// sl local_address rem_address st ...: the port and the state
		// in hex; 03 is SYN_RECV (include/net/tcp_states.h).
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasSuffix(f[1], fmt.Sprintf(":%04X", port)) && f[3] == "03" {
			n++
		}
	}
	return n
}

// awaitSynRecv waits, at most 2 s, for ns to hold want half-open
// connections to port, and returns how many it holds.
func awaitSynRecv(t *testing.T, ns *probetest.NS, port uint16, want int) int {
	t.Helper()
	var n int
	for range 200 {
		if n = synRecv(t, ns, port); n == want {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return n
}

// TestTCPSYNv6 probes a target across a router over IPv6: a SYN-ACK is
// ok and our kernel's RST to it leaves no half-open connection on the
// target; a closed port is refused; a probe whose SYN-ACK is dropped on
// the way back is lost and leaves a half-open connection (so the check
// above can see one), which the flow's next probe clears with a RST.
func TestTCPSYNv6(t *testing.T) {
	n := newRouted(t)
	const port, closed = 9808, 9809
	listen6(t, n.dst, n.dstAddr, port)
	var e *TCPSYN
	if err := n.src.Do(func() (err error) {
		e, err = NewTCPSYN(TCPSYNConfig{Source: n.srcAddr, PortBase: 61000, Ports: 2})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	runTCPSYN(t, e)
	ports, err := e.AllocPorts(2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	target := Target{Addr: n.dstAddr, Port: port}
	probe := func(sport uint16, tg Target, want Outcome, timeout time.Duration) {
		t.Helper()
		if r := e.Probe(ctx, tg, sport, timeout); r.Outcome != want {
			t.Fatalf("from port %d to %v: %v (%v), want %v", sport, tg, r.Outcome, r.Err, want)
		}
	}
	for _, sport := range ports {
		probe(sport, target, OK, time.Second)
		if c := awaitSynRecv(t, n.dst, port, 0); c != 0 {
			t.Errorf("after a SYN-ACK to port %d: %d half-open connections on the target, want 0", sport, c)
		}
		probe(sport, Target{Addr: n.dstAddr, Port: closed}, Refused, time.Second)
	}

	restore := n.loseAnswers(t)
	probe(ports[0], target, Lost, 300*time.Millisecond)
	if c := awaitSynRecv(t, n.dst, port, 1); c != 1 {
		t.Fatalf("after a lost SYN-ACK: %d half-open connections on the target, want 1", c)
	}
	restore()
	probe(ports[0], target, OK, time.Second)
	if c := awaitSynRecv(t, n.dst, port, 0); c != 0 {
		t.Errorf("after the flow's next probe: %d half-open connections on the target, want 0", c)
	}
	if c := e.Malformed.Load(); c != 0 {
		t.Errorf("%d malformed segments", c)
	}
}

// TestTraceIPv6 traces two flows across a router namespace: each reaches
// the destination at hop 2 with the router at hop 1, and every packet of
// a flow that the router sees, regular probe or trace probe at any hop
// limit, carries the flow's label.
func TestTraceIPv6(t *testing.T) {
	n := newRouted(t)
	srcAddr, dstAddr := n.srcAddr, n.dstAddr
	const port = 9808
	listen6(t, n.dst, dstAddr, port)
	capture := sniffIPv6(t, n.router, n.routerIn)

	var e *TCPSYN
	var tr *Tracer
	if err := n.src.Do(func() (err error) {
		if e, err = NewTCPSYN(TCPSYNConfig{Source: srcAddr, PortBase: 61000, Ports: 2}); err != nil {
			return err
		}
		tr, err = NewTracer(e, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	runTCPSYN(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	trDone := make(chan error, 1)
	go func() { trDone <- tr.Run(ctx) }()
	defer func() { cancel(); tr.Close(); <-trDone }()
	ports, err := e.AllocPorts(2)
	if err != nil {
		t.Fatal(err)
	}
	target := Target{Addr: dstAddr, Port: port}
	// The path first, a few tries each: on a loaded machine (CI's race
	// phase) a fresh network lost a first SYN in 1 s once. The trace's
	// own counts below are the test.
	for _, sport := range ports {
		r := e.Probe(ctx, target, sport, 2*time.Second)
		for try := 2; r.Outcome != OK && try <= 3; try++ {
			t.Logf("probe from %d: %v (%v), try %d", sport, r.Outcome, r.Err, try)
			r = e.Probe(ctx, target, sport, 2*time.Second)
		}
		if r.Outcome != OK {
			t.Fatalf("probe from %d: %v (%v) three times", sport, r.Outcome, r.Err)
		}
	}
	fts, err := tr.Trace(ctx, target, ports, TraceConfig{Probes: 3, MaxTTL: 4, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, ft := range fts {
		t.Logf("sport %d: %v reached %v e2e %d/%d", ft.SourcePort, ft.Path(), ft.Reached, ft.Received, ft.Sent)
		if !ft.Reached || len(ft.Hops) != 2 || ft.Hops[0].Addr != n.routerAddr || ft.Hops[0].Received != 3 ||
			ft.Hops[1].Addr != dstAddr || !ft.Hops[1].Destination || ft.Received != ft.Sent {
			t.Errorf("sport %d: hops %+v reached %v, want %s (3 answers) then %s", ft.SourcePort, ft.Hops, ft.Reached, n.routerAddr, dstAddr)
		}
	}
	if c := tr.Foreign.Load(); c != 0 {
		t.Errorf("%d ICMPv6 errors quoted no probe of ours", c)
	}

	// What the router saw of our SYNs: each flow's labels, and the hop
	// limits. (Our kernel's RSTs to the SYN-ACKs carry a label of its
	// own choosing.)
	labels := map[uint16]map[uint32]int{}
	hopLimits := map[uint8]bool{}
	for _, pkt := range capture() {
		if len(pkt) < ipv6HeaderLen+20 || pkt[6] != 6 || netip.AddrFrom16([16]byte(pkt[8:24])) != srcAddr ||
			pkt[ipv6HeaderLen+13]&0x02 == 0 {
			continue
		}
		sport := binary.BigEndian.Uint16(pkt[ipv6HeaderLen:])
		if labels[sport] == nil {
			labels[sport] = map[uint32]int{}
		}
		labels[sport][binary.BigEndian.Uint32(pkt)&0xfffff]++
		hopLimits[pkt[7]] = true
	}
	for _, sport := range ports {
		want := FlowLabel(netip.AddrPortFrom(srcAddr, sport), netip.AddrPortFrom(dstAddr, port))
		// A regular probe, and at least 3 trace probes at each of 2 hop
		// limits, all with the flow's label.
		if got := labels[sport]; got[want] < 1+2*3 || len(got) != 1 {
			t.Errorf("sport %d: flow labels seen by the router %v, want every probe's %#x", sport, got, want)
		}
	}
	if !hopLimits[1] || !hopLimits[2] {
		t.Errorf("hop limits seen by the router: %v, want 1 and 2 among them", hopLimits)
	}
}

// sniffIPv6 captures the IPv6 packets arriving on link in ns (an
// AF_PACKET socket, which sees the whole IPv6 header an IP socket would
// not) and returns a function that stops and returns them.
func sniffIPv6(t *testing.T, ns *probetest.NS, link string) func() [][]byte {
	t.Helper()
	var fd int
	if err := ns.Do(func() error {
		l, err := ns.Netlink().LinkByName(link)
		if err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_IPV6))
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, proto); err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IPV6), Ifindex: l.Attrs().Index}); err != nil {
			unix.Close(fd)
			return err
		}
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
		return nil
	}); err != nil {
		t.Fatalf("capture on %s in %s: %v", link, ns.Name, err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			unix.Close(fd)
		}
	})
	return func() [][]byte {
		var out [][]byte
		buf := make([]byte, 2048)
		for range 10000 { // bounded: the queue holds far fewer
			n, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
			if errors.Is(err, unix.EAGAIN) {
				break
			}
			if err != nil {
				t.Fatalf("capture: %v", err)
			}
			out = append(out, append([]byte(nil), buf[:n]...))
		}
		closed = true
		unix.Close(fd)
		return out
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// TestRawRecvIPv6Allocs: the IPv6 raw socket's reader, recvfrom by hand
// and the header it synthesizes, allocates nothing per packet.
func TestRawRecvIPv6Allocs(t *testing.T) {
	ns := probetest.NewNS(t, "allocs")
	lo := netip.IPv6Loopback()
	const base = 61000
	var r *linuxRaw
	if err := ns.Do(func() (err error) {
		r, err = openTCPRaw(lo, base, 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer r.close()
	const runs = 50
	enc := newSYNEncoder()
	// SYNs to our own port come back in on the loopback; nothing listens
	// there, so the kernel's RSTs go to port 1, which the filter drops.
	for i := range runs + 1 {
		b, err := enc.encode(synPacket{src: lo, dst: lo, sport: 1, dport: base, seq: uint32(i), ttl: 64})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.send(b, lo); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 1500)
	dec := newTCPDecoder()
	got := 0
	allocs := testing.AllocsPerRun(runs, func() {
		n, _, err := r.recv(buf)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := dec.decode(buf[:n])
		if err != nil || rep.src != lo || rep.dst != lo || rep.dport != base || !rep.syn {
			t.Fatalf("received %+v (%v), want our SYN to ::1 port %d", rep, err, base)
		}
		got++
	})
	if allocs != 0 {
		t.Errorf("IPv6 raw receive and decode: %v allocs per packet, want 0", allocs)
	}
	if got != runs+1 {
		t.Errorf("received %d packets, want %d", got, runs+1)
	}
}
