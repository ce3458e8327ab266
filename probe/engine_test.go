package probe

import (
	"context"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
)

// needRaw skips tests that open raw sockets when not root.
func needRaw(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_RAW) for raw sockets; CI runs as root")
	}
}

var (
	loopback  = netip.MustParseAddr("127.0.0.1")
	loopback6 = netip.IPv6Loopback()
)

// loopbacks are the engines' loopback tests' sources, by family.
var loopbacks = []struct {
	name string
	addr netip.Addr
}{{"ipv4", loopback}, {"ipv6", loopback6}}

func startTCPSYN(t *testing.T, src netip.Addr, base uint16, ports int) *TCPSYN {
	t.Helper()
	e, err := NewTCPSYN(TCPSYNConfig{Source: src, PortBase: base, Ports: ports})
	if err != nil {
		t.Fatal(err)
	}
	runTCPSYN(t, e)
	return e
}

// runTCPSYN runs e's reader until the test ends.
func runTCPSYN(t *testing.T, e *TCPSYN) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// listen listens on a free TCP port of addr until the test ends.
func listen(t *testing.T, addr netip.Addr) (net.Listener, uint16) {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, uint16(ln.Addr().(*net.TCPAddr).Port)
}

func TestTCPSYNLoopback(t *testing.T) {
	needRaw(t)
	for i, lo := range loopbacks {
		t.Run(lo.name, func(t *testing.T) {
			_, open := listen(t, lo.addr)
			closedLn, closed := listen(t, lo.addr)
			closedLn.Close()

			e := startTCPSYN(t, lo.addr, 61100+uint16(i)*16, 4)
			ports, err := e.AllocPorts(4)
			if err != nil {
				t.Fatal(err)
			}
			for _, sport := range ports {
				r := e.Probe(context.Background(), Target{Addr: lo.addr, Port: open}, sport, time.Second)
				if r.Outcome != OK || r.RTT <= 0 || r.RTT > time.Second {
					t.Errorf("open port from %d: got %v rtt %v err %v, want ok", sport, r.Outcome, r.RTT, r.Err)
				}
				// The same flow again: the kernel's RST must have cleared the
				// half-open connection, so this is a clean SYN-ACK too.
				if r := e.Probe(context.Background(), Target{Addr: lo.addr, Port: open}, sport, time.Second); r.Outcome != OK {
					t.Errorf("open port again from %d: got %v err %v", sport, r.Outcome, r.Err)
				}
				if r := e.Probe(context.Background(), Target{Addr: lo.addr, Port: closed}, sport, time.Second); r.Outcome != Refused {
					t.Errorf("closed port from %d: got %v err %v, want refused", sport, r.Outcome, r.Err)
				}
				// Padded: the SYN-ACK acknowledges the SYN alone, a closed
				// port's RST the padding too; both are answers.
				for _, port := range []uint16{open, closed} {
					if r := e.ProbeSized(context.Background(), Target{Addr: lo.addr, Port: port}, sport, time.Second, 1400); r.Outcome != map[uint16]Outcome{open: OK, closed: Refused}[port] {
						t.Errorf("1,400 bytes to port %d from %d: got %v err %v", port, sport, r.Outcome, r.Err)
					}
				}
			}
			if r := e.Probe(context.Background(), Target{Addr: lo.addr, Port: open}, 9, time.Second); r.Outcome != LocalError {
				t.Errorf("unreserved source port: got %v, want local_error", r.Outcome)
			}
			other := loopbacks[1-i].addr
			if r := e.Probe(context.Background(), Target{Addr: other, Port: open}, ports[0], time.Second); r.Outcome != LocalError || r.Reason != "config" {
				t.Errorf("target %s of the other family: got %v %q, want local_error config", other, r.Outcome, r.Reason)
			}
		})
	}
}

func TestICMPLoopback(t *testing.T) {
	needRaw(t)
	for i, lo := range loopbacks {
		t.Run(lo.name, func(t *testing.T) {
			e, err := NewICMP(lo.addr, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go e.Run(ctx)
			for i := 0; i < 5; i++ {
				r := e.Probe(ctx, Target{Addr: lo.addr}, time.Second)
				if r.Outcome != OK || r.RTT <= 0 {
					t.Fatalf("probe %d: got %v rtt %v err %v", i, r.Outcome, r.RTT, r.Err)
				}
			}
			other := loopbacks[1-i].addr
			if r := e.Probe(ctx, Target{Addr: other}, time.Second); r.Outcome != LocalError || r.Reason != "config" {
				t.Errorf("target %s of the other family: got %v %q, want local_error config", other, r.Outcome, r.Reason)
			}
			t.Logf("privileged=%v id=%d", e.Privileged(), e.id)
		})
	}
}

func TestSourceFamily(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src netip.Addr
		ok  bool
	}{
		{testSrc, true},
		{testSrc6, true},
		{netip.MustParseAddr("::ffff:192.0.2.1"), false},
		{netip.MustParseAddr("fe80::1%eth0"), false},
		{netip.Addr{}, false},
	} {
		err := TCPSYNConfig{Source: tc.src, PortBase: 61000, Ports: 4}.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("tcp_syn source %v: %v, want ok %v", tc.src, err, tc.ok)
		}
		if tc.ok {
			continue
		}
		if _, err := NewICMP(tc.src, nil); err == nil {
			t.Errorf("icmp source %v accepted", tc.src)
		}
	}
}
