package probe

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netprober/prober/probe/probetest"
)

func newPinger(t testing.TB, addr netip.AddrPort, cfg HTTP2Config) *HTTP2Pinger {
	t.Helper()
	p, err := NewHTTP2Pinger(Target{Addr: addr.Addr(), Port: addr.Port()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// ping calls p.Ping and checks the outcome and the Result's reason.
func ping(t *testing.T, p *HTTP2Pinger, want Outcome, wantReason string) Result {
	t.Helper()
	r := p.Ping(t.Context())
	if r.Outcome != want || r.Reason != wantReason {
		t.Fatalf("Ping = %v %q (%v), want %v %q", r.Outcome, r.Reason, r.Err, want, wantReason)
	}
	if want == OK && r.RTT <= 0 {
		t.Fatalf("Ping OK with RTT %v", r.RTT)
	}
	return r
}

func wantResets(t *testing.T, p *HTTP2Pinger, want map[string]uint64) {
	t.Helper()
	got := p.Resets()
	for _, r := range []ResetReason{ResetPingTimeout, ResetRefused, ResetPeer, ResetTLS, ResetGoAway} {
		if got[r.String()] != want[r.String()] {
			t.Errorf("resets = %v, want %v", got, want)
			return
		}
	}
}

func TestHTTP2PingH2C(t *testing.T) {
	t.Parallel()
	addr, _ := startResponder(t, ResponderConfig{}, defaultResponderLimits)
	p := newPinger(t, addr, HTTP2Config{})
	for range 3 {
		ping(t, p, OK, "")
	}
	wantResets(t, p, nil)
}

func TestHTTP2PingTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile := writeCert(t, "127.0.0.1", "agent.test")
	wrongCA, _ := writeCert(t, "127.0.0.1")
	addr, _ := startResponder(t, ResponderConfig{TLS: &ResponderTLS{CertFile: certFile, KeyFile: keyFile}}, defaultResponderLimits)
	selfAddr, _ := startResponder(t, ResponderConfig{Listen: "127.0.0.1:0", TLS: &ResponderTLS{}}, defaultResponderLimits)
	h2cAddr, _ := startResponder(t, ResponderConfig{}, defaultResponderLimits)
	for _, tc := range []struct {
		name string
		addr netip.AddrPort
		cfg  HTTP2Config
		want Outcome
	}{
		{"ca file", addr, HTTP2Config{TLS: true, CAFile: certFile}, OK},
		{"server name", addr, HTTP2Config{TLS: true, CAFile: certFile, ServerName: "agent.test"}, OK},
		{"self-signed, skip verify", selfAddr, HTTP2Config{TLS: true, InsecureSkipVerify: true}, OK},
		{"wrong ca", addr, HTTP2Config{TLS: true, CAFile: wrongCA}, Refused},
		{"wrong server name", addr, HTTP2Config{TLS: true, CAFile: certFile, ServerName: "other.test"}, Refused},
		{"self-signed, system roots", selfAddr, HTTP2Config{TLS: true}, Refused},
		{"h2c server", h2cAddr, HTTP2Config{TLS: true, InsecureSkipVerify: true}, Refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPinger(t, tc.addr, tc.cfg)
			if tc.want == OK {
				ping(t, p, OK, "")
				ping(t, p, OK, "")
				wantResets(t, p, nil)
				return
			}
			ping(t, p, Refused, "tls")
			wantResets(t, p, map[string]uint64{"tls": 1})
		})
	}
}

// TestHTTP2PingIPv6: an IPv6 target is dialled as [addr]:port, and over
// TLS its certificate is checked for the address.
func TestHTTP2PingIPv6(t *testing.T) {
	t.Parallel()
	if ln, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		ln.Close()
	}
	certFile, keyFile := writeCert(t, "::1")
	h2c, _ := startResponderOn(t, "[::1]:0", ResponderConfig{}, defaultResponderLimits)
	tlsAddr, _ := startResponderOn(t, "[::1]:0", ResponderConfig{TLS: &ResponderTLS{CertFile: certFile, KeyFile: keyFile}}, defaultResponderLimits)
	for _, tc := range []struct {
		name string
		addr netip.AddrPort
		cfg  HTTP2Config
	}{{"h2c", h2c, HTTP2Config{}}, {"tls", tlsAddr, HTTP2Config{TLS: true, CAFile: certFile}}} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.addr.Addr().Is6() {
				t.Fatalf("responder on %s, want ::1", tc.addr)
			}
			p := newPinger(t, tc.addr, tc.cfg)
			ping(t, p, OK, "")
			ping(t, p, OK, "")
			wantResets(t, p, nil)
		})
	}
}

// closedPort returns a loopback port nothing listens on: a SYN to it
// gets an RST.
func closedPort(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

func TestHTTP2PingRefused(t *testing.T) {
	t.Parallel()
	p := newPinger(t, closedPort(t), HTTP2Config{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	ping(t, p, Refused, "refused")
	time.Sleep(2 * time.Millisecond)
	ping(t, p, Refused, "refused")
	wantResets(t, p, map[string]uint64{"refused": 2})
}

func TestHTTP2PingBackoff(t *testing.T) {
	t.Parallel()
	p := newPinger(t, closedPort(t), HTTP2Config{MinBackoff: time.Hour})
	ping(t, p, Refused, "refused")
	ping(t, p, LocalError, "backoff") // no packet sent, not counted against the network
	wantResets(t, p, map[string]uint64{"refused": 1})
}

// TestHTTP2PingNoBackoffOnTimeout: dials that time out (a black hole that
// eats SYNs) are lost probes, and each next Ping dials again, so the
// connection is back one interval after an outage however long it was.
// The dialer is the test's: nothing here can make the kernel drop a SYN
// to loopback.
func TestHTTP2PingNoBackoffOnTimeout(t *testing.T) {
	t.Parallel()
	addr, _ := startResponder(t, ResponderConfig{}, defaultResponderLimits)
	p := newPinger(t, addr, HTTP2Config{Timeout: 50 * time.Millisecond, MinBackoff: time.Hour, MaxBackoff: time.Hour})
	var dials atomic.Int32
	var holed atomic.Bool
	holed.Store(true)
	p.dialTCP = func(ctx context.Context, a string) (net.Conn, error) {
		dials.Add(1)
		if holed.Load() {
			<-ctx.Done()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: ctx.Err()}
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", a)
	}
	for range 5 {
		ping(t, p, Lost, "")
	}
	if n := dials.Load(); n != 5 {
		t.Errorf("%d dials for 5 Pings into a black hole, want 5 (no backoff after a timeout)", n)
	}
	holed.Store(false)
	// The hole is gone: the next dial works. 50 ms for a dial, the HTTP/2
	// handshake and a PING can pass on a loaded machine, so a few tries;
	// each Lost is a timeout, which is what must not back off.
	var r Result
	for range 10 {
		if r = p.Ping(t.Context()); r.Outcome != Lost {
			break
		}
	}
	if r.Outcome != OK {
		t.Fatalf("Ping after the hole closed = %v %q (%v), want ok", r.Outcome, r.Reason, r.Err)
	}
	wantResets(t, p, map[string]uint64{})
}

// TestHTTP2PingServerGone: the responder dies under an open connection,
// then stays down.
func TestHTTP2PingServerGone(t *testing.T) {
	t.Parallel()
	addr, srv := startResponder(t, ResponderConfig{}, defaultResponderLimits)
	p := newPinger(t, addr, HTTP2Config{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	ping(t, p, OK, "")
	srv.Close() // closes the listener and the connection: FIN, no GOAWAY
	// The loss of the connection is seen either before the next PING (then
	// the redial is refused) or under it.
	r := p.Ping(t.Context())
	if r.Outcome != Refused || (r.Reason != "reset" && r.Reason != "refused") {
		t.Fatalf("Ping after the server died = %v %q (%v), want refused with reason reset or refused", r.Outcome, r.Reason, r.Err)
	}
	time.Sleep(2 * time.Millisecond) // past the backoff
	ping(t, p, Refused, "refused")
	if got := p.Resets(); got["reset"] != 1 || got["refused"] < 1 {
		t.Errorf("resets = %v, want reset 1 and refused at least 1", got)
	}
}

// TestHTTP2PingRST: the flow is reset under an open connection; the
// target is still there, so the redial works.
func TestHTTP2PingRST(t *testing.T) {
	t.Parallel()
	addr, _ := startResponder(t, ResponderConfig{}, defaultResponderLimits)
	px := startProxy(t, addr)
	p := newPinger(t, px.addr(), HTTP2Config{})
	ping(t, p, OK, "")
	if n := px.resetAll(); n != 1 {
		t.Fatalf("proxy reset %d flows, want 1", n)
	}
	if r := p.Ping(t.Context()); r.Outcome != OK {
		// Seen under the PING rather than before it: the next one redials.
		if r.Outcome != Refused || r.Reason != "reset" {
			t.Fatalf("Ping after RST = %v %q (%v), want ok or refused/reset", r.Outcome, r.Reason, r.Err)
		}
		ping(t, p, OK, "")
	}
	wantResets(t, p, map[string]uint64{"reset": 1})
}

// TestHTTP2PingGoAway: the responder's HTTP/2 idle timeout sends GOAWAY
// and closes the connection a second later. Either way the pinger
// replaces the connection before its next PING, which costs no probe,
// and counts a goaway (not a reset).
func TestHTTP2PingGoAway(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		wait time.Duration
	}{
		{"draining", 400 * time.Millisecond},             // GOAWAY at 200ms
		{"closed after goaway", 1500 * time.Millisecond}, // and the close 1s later
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lim := defaultResponderLimits
			lim.h2Idle = 200 * time.Millisecond
			addr, _ := startResponder(t, ResponderConfig{}, lim)
			p := newPinger(t, addr, HTTP2Config{})
			ping(t, p, OK, "")
			time.Sleep(tc.wait)
			ping(t, p, OK, "")
			wantResets(t, p, map[string]uint64{"goaway": 1})
		})
	}
}

// TestHTTP2PingBlackHole is seed 001: the load balancer forgets the flows
// open now while new flows pass. PINGs are lost, the connection is
// declared dead after DeadAfter, and the redial recovers at once.
func TestHTTP2PingBlackHole(t *testing.T) {
	t.Parallel()
	addr, _ := startResponder(t, ResponderConfig{}, defaultResponderLimits)
	px := startProxy(t, addr)
	p := newPinger(t, px.addr(), HTTP2Config{Timeout: 100 * time.Millisecond, DeadAfter: 3})
	ping(t, p, OK, "")
	px.freezeExisting()
	for i := range 3 {
		ping(t, p, Lost, "")
		want := map[string]uint64{}
		if i == 2 {
			want["ping_timeout"] = 1
		}
		wantResets(t, p, want)
	}
	ping(t, p, OK, "") // a new flow
	wantResets(t, p, map[string]uint64{"ping_timeout": 1})
}

// TestHTTP2PingFrozenThenHealed: everything through the proxy is
// black-holed, new flows included (TCP still connects: the proxy accepts
// it). Once the fault clears, the next PINGs are OK within 2 intervals.
func TestHTTP2PingFrozenThenHealed(t *testing.T) {
	t.Parallel()
	addr, _ := startResponder(t, ResponderConfig{}, defaultResponderLimits)
	px := startProxy(t, addr)
	p := newPinger(t, px.addr(), HTTP2Config{Timeout: 100 * time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	ping(t, p, OK, "")
	px.freeze()
	for range 3 {
		ping(t, p, Lost, "")
	}
	wantResets(t, p, map[string]uint64{"ping_timeout": 1})
	// The redial connects to the proxy but its first PING is lost: a
	// connection that never answered is dropped at once.
	ping(t, p, Lost, "")
	wantResets(t, p, map[string]uint64{"ping_timeout": 2})
	px.unfreeze()
	time.Sleep(20 * time.Millisecond) // past MaxBackoff: one probe interval
	ping(t, p, OK, "")
}

// TestHTTP2PingClose: Close ends a Ping waiting on a dead flow and leaves
// the pinger unusable.
func TestHTTP2PingClose(t *testing.T) {
	t.Parallel()
	addr, _ := startResponder(t, ResponderConfig{}, defaultResponderLimits)
	px := startProxy(t, addr)
	p := newPinger(t, px.addr(), HTTP2Config{Timeout: time.Minute})
	ping(t, p, OK, "")
	px.freezeExisting()
	done := make(chan Result)
	go func() { done <- p.Ping(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	p.Close()
	select {
	case r := <-done:
		if r.Outcome != LocalError || r.Reason != "canceled" {
			t.Errorf("Ping cut by Close = %v %q, want local_error canceled", r.Outcome, r.Reason)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a Ping in progress")
	}
	ping(t, p, LocalError, "canceled")
}

func TestNewHTTP2PingerErrors(t *testing.T) {
	t.Parallel()
	target := Target{Addr: netip.MustParseAddr("192.0.2.1"), Port: 8080}
	for _, tc := range []struct {
		name   string
		target Target
		cfg    HTTP2Config
		want   string
	}{
		{"no port", Target{Addr: target.Addr}, HTTP2Config{}, "need an address and a port"},
		{"ca without tls", target, HTTP2Config{CAFile: "/ca.pem"}, "caFile: needs tls"},
		{"ca and skip", target, HTTP2Config{TLS: true, CAFile: "/nonexistent/ca.pem", InsecureSkipVerify: true}, "contradicts caFile"},
		{"missing ca", target, HTTP2Config{TLS: true, CAFile: "/nonexistent/ca.pem"}, "/nonexistent/ca.pem"},
		{"negative", target, HTTP2Config{DeadAfter: -1}, "deadAfter: -1 not in 1..100"},
		{"dead after too many", target, HTTP2Config{DeadAfter: MaxHTTP2DeadAfter + 1}, "deadAfter: 101"},
		{"negative timeout", target, HTTP2Config{Timeout: -time.Second}, "timeout: -1s must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewHTTP2Pinger(tc.target, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestHTTP2PingReconnectLeak: 1,000 connections reset under the pinger
// and redialled leave no goroutine and no file descriptor behind. Not
// parallel: it counts the process's goroutines.
func TestHTTP2PingReconnectLeak(t *testing.T) {
	addr, _ := startResponder(t, ResponderConfig{}, defaultResponderLimits)
	px := startProxy(t, addr)
	p := newPinger(t, px.addr(), HTTP2Config{})
	ping(t, p, OK, "")
	time.Sleep(100 * time.Millisecond)
	g0, f0 := runtime.NumGoroutine(), probetest.OpenFDs(t)
	const n = 1000
	for i := range n {
		if got := px.resetAll(); got != 1 {
			t.Fatalf("reconnect %d: proxy has %d flows, want 1", i, got)
		}
		if r := p.Ping(t.Context()); r.Outcome != OK {
			if r.Outcome != Refused || r.Reason != "reset" {
				t.Fatalf("reconnect %d: Ping = %v %q (%v)", i, r.Outcome, r.Reason, r.Err)
			}
			ping(t, p, OK, "")
		}
	}
	if got := p.Resets()["reset"]; got != n {
		t.Errorf("reset count %d, want %d", got, n)
	}
	if g, f := probetest.Settle(t, g0, f0, 2); g > g0+2 || f > f0+2 {
		t.Errorf("after %d reconnects: %d goroutines (was %d), %d fds (was %d)", n, g, g0, f, f0)
	}
	// And closing everything gives back what the test took.
	p.Close()
	px.close()
	if g, f := probetest.Settle(t, g0-1, f0-1, 0); g >= g0 || f >= f0 {
		t.Errorf("after Close: %d goroutines, %d fds; want fewer than with a connection open (%d, %d)", g, f, g0, f0)
	}
}

func BenchmarkHTTP2Ping(b *testing.B) {
	addr, _ := startResponder(b, ResponderConfig{}, defaultResponderLimits)
	p := newPinger(b, addr, HTTP2Config{})
	ctx := context.Background()
	if r := p.Ping(ctx); r.Outcome != OK {
		b.Fatal(r.Err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r := p.Ping(ctx); r.Outcome != OK {
			b.Fatal(r.Err)
		}
	}
}
