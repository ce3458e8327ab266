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

var loopback = netip.MustParseAddr("127.0.0.1")

func startTCPSYN(t *testing.T, base uint16, ports int) *TCPSYN {
	t.Helper()
	e, err := NewTCPSYN(TCPSYNConfig{Source: loopback, PortBase: base, Ports: ports})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return e
}

func TestTCPSYNLoopback(t *testing.T) {
	needRaw(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	open := uint16(ln.Addr().(*net.TCPAddr).Port)
	closedLn, _ := net.Listen("tcp4", "127.0.0.1:0")
	closed := uint16(closedLn.Addr().(*net.TCPAddr).Port)
	closedLn.Close()

	e := startTCPSYN(t, 61100, 4)
	ports, err := e.AllocPorts(4)
	if err != nil {
		t.Fatal(err)
	}
	for _, sport := range ports {
		r := e.Probe(context.Background(), Target{Addr: loopback, Port: open}, sport, time.Second)
		if r.Outcome != OK || r.RTT <= 0 || r.RTT > time.Second {
			t.Errorf("open port from %d: got %v rtt %v err %v, want ok", sport, r.Outcome, r.RTT, r.Err)
		}
		// The same flow again: the kernel's RST must have cleared the
		// half-open connection, so this is a clean SYN-ACK too.
		if r := e.Probe(context.Background(), Target{Addr: loopback, Port: open}, sport, time.Second); r.Outcome != OK {
			t.Errorf("open port again from %d: got %v err %v", sport, r.Outcome, r.Err)
		}
		if r := e.Probe(context.Background(), Target{Addr: loopback, Port: closed}, sport, time.Second); r.Outcome != Refused {
			t.Errorf("closed port from %d: got %v err %v, want refused", sport, r.Outcome, r.Err)
		}
	}
	if r := e.Probe(context.Background(), Target{Addr: loopback, Port: open}, 9, time.Second); r.Outcome != LocalError {
		t.Errorf("unreserved source port: got %v, want local_error", r.Outcome)
	}
}

func TestICMPLoopback(t *testing.T) {
	needRaw(t)
	e, err := NewICMP(loopback, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	for i := 0; i < 5; i++ {
		r := e.Probe(ctx, Target{Addr: loopback}, time.Second)
		if r.Outcome != OK || r.RTT <= 0 {
			t.Fatalf("probe %d: got %v rtt %v err %v", i, r.Outcome, r.RTT, r.Err)
		}
	}
	t.Logf("privileged=%v id=%d", e.Privileged(), e.id)
}
