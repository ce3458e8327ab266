package probe

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/netprober/prober/probe/probetest"
)

var loopback4 = netip.MustParseAddr("127.0.0.1")

func newDNSFlow(t testing.TB, server netip.AddrPort, tcp bool) *DNSFlow {
	t.Helper()
	f, err := NewDNSFlow(DNSConfig{Source: loopback4, Server: server, TCP: tcp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func transport(tcp bool) string {
	if tcp {
		return "tcp"
	}
	return "udp"
}

// Each way a server answers is the outcome it is: only silence is loss.
func TestDNSOutcomes(t *testing.T) {
	s := probetest.NewDNSServer(t, netip.AddrPortFrom(loopback4, 0))
	cases := []struct {
		mode    probetest.DNSMode
		outcome Outcome
		reason  string
	}{
		{probetest.DNSAnswer, OK, ""},
		{probetest.DNSServFail, AnswerError, ReasonServFail},
		{probetest.DNSNXDomain, AnswerError, ReasonNXDomain},
		{probetest.DNSTruncate, AnswerError, ReasonTruncated},
		{probetest.DNSWrongID, AnswerError, ReasonWrongID},
		{probetest.DNSWrongQuestion, AnswerError, ReasonWrongQuestion},
		{probetest.DNSSilent, Lost, ""},
	}
	for _, tcp := range []bool{false, true} {
		f := newDNSFlow(t, s.Addr, tcp)
		for _, c := range cases {
			s.SetMode(c.mode)
			timeout := 2 * time.Second
			if c.outcome == Lost {
				timeout = 200 * time.Millisecond
			}
			r := f.Probe(context.Background(), timeout)
			if r.Outcome != c.outcome || r.Reason != c.reason {
				t.Errorf("%s, mode %d: %s %q (%v), want %s %q", transport(tcp), c.mode, r.Outcome, r.Reason, r.Err, c.outcome, c.reason)
			}
			if r.Outcome.Reached() && r.RTT <= 0 {
				t.Errorf("%s, mode %d: answered with RTT %s", transport(tcp), c.mode, r.RTT)
			}
		}
	}
}

// A flow keeps its 5-tuple from probe to probe, over TCP too, so ECMP
// keeps it on one path.
func TestDNSFlowKeepsItsPort(t *testing.T) {
	s := probetest.NewDNSServer(t, netip.AddrPortFrom(loopback4, 0))
	for _, tcp := range []bool{false, true} {
		f := newDNSFlow(t, s.Addr, tcp)
		const n = 5
		for i := range n {
			if r := f.Probe(context.Background(), 2*time.Second); r.Outcome != OK {
				t.Fatalf("%s probe %d: %s %q %v", transport(tcp), i, r.Outcome, r.Reason, r.Err)
			}
		}
		clients := s.UDPClients()
		if tcp {
			clients = s.TCPClients()
		}
		want := netip.AddrPortFrom(loopback4, f.SourcePort())
		if len(clients) != 1 || clients[want] != n {
			t.Errorf("%s: server saw clients %v, want %d queries from %s alone", transport(tcp), clients, n, want)
		}
	}
}

// A closed port refuses: ICMP port unreachable over UDP, a reset over
// TCP. Neither is loss.
func TestDNSRefused(t *testing.T) {
	ln, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback4, 0)))
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.LocalAddr().(*net.UDPAddr).AddrPort()
	ln.Close() // a free port, on both transports, almost surely
	for _, tcp := range []bool{false, true} {
		f := newDNSFlow(t, closed, tcp)
		if r := f.Probe(context.Background(), 2*time.Second); r.Outcome != Refused {
			t.Errorf("%s to a closed port: %s %q %v, want refused", transport(tcp), r.Outcome, r.Reason, r.Err)
		}
	}
}

// Close ends a probe in flight at once: a departed target's flows do not
// hold the agent for a timeout.
func TestDNSCloseEndsProbe(t *testing.T) {
	s := probetest.NewDNSServer(t, netip.AddrPortFrom(loopback4, 0))
	s.SetMode(probetest.DNSSilent)
	for _, tcp := range []bool{false, true} {
		f := newDNSFlow(t, s.Addr, tcp)
		time.AfterFunc(100*time.Millisecond, func() { f.Close() })
		start := time.Now()
		r := f.Probe(context.Background(), 20*time.Second)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: closed flow's probe took %s", transport(tcp), took)
		}
		if r.Outcome != LocalError || r.Reason != "closed" {
			t.Errorf("%s: closed mid-probe: %s %q %v, want local_error closed", transport(tcp), r.Outcome, r.Reason, r.Err)
		}
		if r := f.Probe(context.Background(), time.Second); r.Outcome != LocalError {
			t.Errorf("%s: probe after close: %s", transport(tcp), r.Outcome)
		}
	}
}

func TestCheckDNSName(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"kubernetes.default.svc.cluster.local", "kubernetes.default.svc.cluster.local.", ""},
		{"kube-dns.kube-system.svc.", "kube-dns.kube-system.svc.", ""},
		{"", "", "empty"},
		{"a..b.", "", "labels"},
		{strings.Repeat("a", 64) + ".example.", "", "labels"},
		{strings.Repeat("abcdefg.", 40), "", "too long"},
	} {
		got, err := CheckDNSName(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("CheckDNSName(%.20q): %q, %v; want an error saying %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("CheckDNSName(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// checkDNSAnswer on answers no test server sends: garbage, a query
// echoed back, a name in another case.
func TestCheckDNSAnswer(t *testing.T) {
	q, err := newDNSQuery("Kubernetes.default.svc.cluster.local.", false)
	if err != nil {
		t.Fatal(err)
	}
	q.setID(7)
	reply := func(h dnsmessage.Header, name string) []byte {
		b := dnsmessage.NewBuilder(nil, h)
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		msg, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	for _, c := range []struct {
		name    string
		msg     []byte
		outcome Outcome
		reason  string
	}{
		{"garbage", []byte{0, 7, 0x80}, AnswerError, ReasonMalformed},
		{"the query itself", q.msg, AnswerError, ReasonMalformed},
		{"another case", reply(dnsmessage.Header{ID: 7, Response: true}, "kubernetes.DEFAULT.svc.cluster.local."), OK, ""},
		{"another type's rcode", reply(dnsmessage.Header{ID: 7, Response: true, RCode: 9}, "kubernetes.default.svc.cluster.local."), AnswerError, ReasonRCodeOther},
		{"refused", reply(dnsmessage.Header{ID: 7, Response: true, RCode: dnsmessage.RCodeRefused}, "kubernetes.default.svc.cluster.local."), AnswerError, ReasonDNSRefused},
		{"shorter name", reply(dnsmessage.Header{ID: 7, Response: true}, "kubernetes.default.svc.cluster."), AnswerError, ReasonWrongQuestion},
	} {
		o, reason := checkDNSAnswer(c.msg, 7, &q.question)
		if o != c.outcome || reason != c.reason {
			t.Errorf("%s: %s %q, want %s %q", c.name, o, reason, c.outcome, c.reason)
		}
	}
}

// The UDP probe allocates nothing (the test server's answers included,
// which the benchmark's count also holds).
func BenchmarkDNSUDP(b *testing.B) { benchmarkDNS(b, false) }

// A TCP probe is a connection: the net package's dial allocates.
func BenchmarkDNSTCP(b *testing.B) { benchmarkDNS(b, true) }

func benchmarkDNS(b *testing.B, tcp bool) {
	s := probetest.NewDNSServer(b, netip.AddrPortFrom(loopback4, 0))
	f := newDNSFlow(b, s.Addr, tcp)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := f.Probe(ctx, 2*time.Second); r.Outcome != OK {
			b.Fatalf("%s %q %v", r.Outcome, r.Reason, r.Err)
		}
	}
}

// The UDP probe stays allocation-free: an allocation a probe would show
// as 1 a run; the bound leaves room for a stray one elsewhere in the
// process.
func TestDNSUDPAllocs(t *testing.T) {
	s := probetest.NewDNSServer(t, netip.AddrPortFrom(loopback4, 0))
	f := newDNSFlow(t, s.Addr, false)
	ctx := context.Background()
	if r := f.Probe(ctx, 2*time.Second); r.Outcome != OK {
		t.Fatalf("%s %q %v", r.Outcome, r.Reason, r.Err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if r := f.Probe(ctx, 2*time.Second); r.Outcome != OK {
			t.Fatalf("%s %q %v", r.Outcome, r.Reason, r.Err)
		}
	})
	if allocs >= 0.5 {
		t.Errorf("%.2f allocations a UDP DNS probe, want 0", allocs)
	}
}

// A flow lost dnsFailuresToMove times in a row moves to a new source
// port, as a resolver's next lookup would, and keeps it; fewer failures
// keep theirs.
func TestDNSFlowMovesAfterFailures(t *testing.T) {
	s := probetest.NewDNSServer(t, netip.AddrPortFrom(loopback4, 0))
	for _, tcp := range []bool{false, true} {
		f := newDNSFlow(t, s.Addr, tcp)
		ask := func(mode probetest.DNSMode, want Outcome) {
			t.Helper()
			s.SetMode(mode)
			if r := f.Probe(context.Background(), 150*time.Millisecond); r.Outcome != want {
				t.Fatalf("%s: %s %q %v, want %s", transport(tcp), r.Outcome, r.Reason, r.Err, want)
			}
		}
		ask(probetest.DNSAnswer, OK)
		first := f.SourcePort()
		for range dnsFailuresToMove - 1 {
			ask(probetest.DNSSilent, Lost)
		}
		ask(probetest.DNSAnswer, OK)
		if got := f.SourcePort(); got != first {
			t.Errorf("%s: moved from port %d to %d after %d failures", transport(tcp), first, got, dnsFailuresToMove-1)
		}
		for range dnsFailuresToMove {
			ask(probetest.DNSSilent, Lost)
		}
		ask(probetest.DNSAnswer, OK)
		moved := f.SourcePort()
		if moved == first {
			t.Errorf("%s: port %d after %d failures in a row, was %d", transport(tcp), moved, dnsFailuresToMove, first)
		}
		ask(probetest.DNSAnswer, OK)
		if f.SourcePort() != moved {
			t.Errorf("%s: moved again without failing", transport(tcp))
		}
	}
}
