package probe

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// timeExceeded builds the ICMP error router sends to to about the SYN p,
// quoting the IP header and the first quote bytes of TCP.
func timeExceeded(t testing.TB, router, to netip.Addr, typ, code uint8, p synPacket, quote int) []byte {
	t.Helper()
	syn, err := newSYNEncoder().encode(p)
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 8, 8+20+quote)
	body[0], body[1] = typ, code
	body = append(body, syn[:20+quote]...)
	binary.BigEndian.PutUint16(body[2:], checksum(body))
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: router.AsSlice(), DstIP: to.AsSlice()}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, serializeOpts, ip, gopacket.Payload(body)); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

var testRouter = netip.MustParseAddr("203.0.113.1")

func TestDecodeQuote(t *testing.T) {
	t.Parallel()
	seq := traceSeq(0xbeef, 3, 2)
	p := synPacket{src: testSrc, dst: testDst, sport: 61000, dport: 9808, seq: seq, ttl: 1, ipID: traceIPID(3, 2)}
	for _, quote := range []int{8, 20, 24} {
		b := timeExceeded(t, testRouter, testSrc, icmpTimeExceeded, 0, p, quote)
		q, ok := decodeQuote(b)
		if !ok {
			t.Fatalf("quote of %d TCP bytes: not decoded", quote)
		}
		want := icmpQuote{from: testRouter, to: testSrc, typ: icmpTimeExceeded, src: testSrc, dst: testDst,
			ipID: traceIPID(3, 2), sport: 61000, dport: 9808, seq: seq, quotedTTL: 1, quotedSize: 20 + quote}
		if q != want {
			t.Errorf("quote of %d TCP bytes:\n got %+v\nwant %+v", quote, q, want)
		}
		if n, ttl, probe := splitSeq(q.seq); n != 0xbeef || ttl != 3 || probe != 2 {
			t.Errorf("splitSeq = %#x %d %d", n, ttl, probe)
		}
	}
	good := timeExceeded(t, testRouter, testSrc, icmpTimeExceeded, 0, p, 8)
	for name, b := range map[string][]byte{
		"short quote":  good[:len(good)-1],
		"echo reply":   append(append([]byte(nil), good[:20]...), append([]byte{0, 0}, good[22:]...)...),
		"not ipv4":     append([]byte{0x60}, good[1:]...),
		"quote is udp": func() []byte { b := append([]byte(nil), good...); b[20+8+9] = 17; return b }(),
		"empty":        nil,
	} {
		if _, ok := decodeQuote(b); ok {
			t.Errorf("decodeQuote(%s) accepted", name)
		}
	}
}

func TestDecodeQuoteAllocs(t *testing.T) {
	b := timeExceeded(t, testRouter, testSrc, icmpTimeExceeded, 0, synPacket{src: testSrc, dst: testDst, sport: 1, dport: 2, seq: 3, ttl: 1}, 8)
	if n := testing.AllocsPerRun(1000, func() { decodeQuote(b) }); n != 0 {
		t.Errorf("decodeQuote: %v allocs, want 0", n)
	}
}

func BenchmarkDecodeQuote(b *testing.B) {
	pkt := timeExceeded(b, testRouter, testSrc, icmpTimeExceeded, 0, synPacket{src: testSrc, dst: testDst, sport: 1, dport: 2, seq: 3, ttl: 1}, 8)
	b.ReportAllocs()
	for b.Loop() {
		decodeQuote(pkt)
	}
}

// FuzzDecodeQuote: never panics, and what it accepts is a TCP quote inside
// an ICMP error of the two types the tracer reads.
func FuzzDecodeQuote(f *testing.F) {
	files, _ := filepath.Glob("testdata/quotes/*.bin")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q, ok := decodeQuote(b)
		if !ok {
			return
		}
		if q.typ != icmpTimeExceeded && q.typ != icmpDestUnreachable {
			t.Fatalf("accepted ICMP type %d", q.typ)
		}
		if !q.src.Is4() || !q.from.Is4() || q.quotedSize < 28 {
			t.Fatalf("accepted %+v", q)
		}
	})
}

// TestQuoteSeeds checks the fuzz seeds still mean what their names say:
// bad-* must be rejected, the others decoded.
func TestQuoteSeeds(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/quotes/*.bin")
	if len(files) < 3 {
		t.Fatalf("%d seeds in testdata/quotes, want at least 3", len(files))
	}
	for _, file := range files {
		b, _ := os.ReadFile(file)
		_, ok := decodeQuote(b)
		if want := filepath.Base(file)[:4] != "bad-"; ok != want {
			t.Errorf("%s: decoded %v, want %v", file, ok, want)
		}
	}
}

func TestReadLoss(t *testing.T) {
	t.Parallel()
	h := func(sent, recv int) HopCount { return HopCount{Sent: sent, Received: recv} }
	tests := []struct {
		name    string
		hops    []HopCount
		dest    HopCount
		lossy   bool
		suspect int
	}{
		{"clean", []HopCount{h(3, 3), h(3, 3), h(3, 3)}, h(3, 3), false, -1},
		{"silent hops are rate limiting", []HopCount{h(3, 0), h(3, 0), h(3, 1)}, h(3, 3), false, -1},
		{"lossy middle hop, clean destination", []HopCount{h(10, 10), h(10, 2), h(10, 10)}, h(10, 10), false, -1},
		{"one lost probe is noise", []HopCount{h(10, 10), h(10, 10)}, h(10, 9), false, -1},
		{"break after hop 2", []HopCount{h(10, 10), h(10, 10), h(10, 5)}, h(10, 5), true, 1},
		{"break after hop 1, rate-limited hop 3", []HopCount{h(10, 10), h(10, 4), h(10, 1)}, h(10, 5), true, 0},
		{"return loss does not move the suspect", []HopCount{h(10, 9), h(10, 10), h(10, 6)}, h(10, 3), true, 1},
		{"dip then recovery is not the break", []HopCount{h(10, 10), h(10, 3), h(10, 10), h(10, 5)}, h(10, 5), true, 2},
		{"silent hop cannot be the suspect", []HopCount{h(10, 10), h(10, 0), h(10, 5)}, h(10, 5), true, 0},
		{"break before the first hop", []HopCount{h(10, 5), h(10, 5)}, h(10, 5), true, -1},
		{"destination unreachable, all silent after hop 2", []HopCount{h(3, 3), h(3, 3)}, h(30, 0), true, 1},
		{"no probes", nil, h(0, 0), false, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lr := ReadLoss(tc.hops, tc.dest, DefaultNoise)
			if lr.Lossy != tc.lossy || lr.SuspectHop != tc.suspect {
				t.Errorf("ReadLoss = lossy %v suspect %d, want lossy %v suspect %d", lr.Lossy, lr.SuspectHop, tc.lossy, tc.suspect)
			}
		})
	}
}

func TestPaths(t *testing.T) {
	t.Parallel()
	a := []string{"198.51.100.1", "", "198.51.100.3"}
	b := []string{"198.51.100.1", "198.51.100.2", ""}
	c := []string{"198.51.100.1", "198.51.100.9", "198.51.100.3"}
	if !SamePath(a, b) || SamePath(b, c) || SamePath(a, a[:2]) {
		t.Error("SamePath: silent hops must match anything, answered ones only themselves, lengths must agree")
	}
	if got := MergePath(a, b); got[1] != "198.51.100.2" || got[2] != "198.51.100.3" {
		t.Errorf("MergePath = %v", got)
	}
	if PathHash(a) == PathHash(b) || PathHash(a) != PathHash(append([]string(nil), a...)) || len(PathHash(a)) != 16 {
		t.Error("PathHash must be stable and tell hop lists apart")
	}
}

// TestTraceSharesEngine traces loopback flows on a TCPSYN engine while
// the same flows' regular probes run: the probes wait for the trace and
// are answered, never busy or lost, and the trace reaches the target at
// TTL 1.
func TestTraceSharesEngine(t *testing.T) {
	needRaw(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	target := Target{Addr: loopback, Port: uint16(ln.Addr().(*net.TCPAddr).Port)}
	e := startTCPSYN(t, 61200, 4)
	tr, err := NewTracer(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tr.Run(ctx)
	ports, _ := e.AllocPorts(4)
	var wg sync.WaitGroup
	results := make([]Result, len(ports))
	for i, p := range ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Millisecond) // let the trace take the flow first
			results[i] = e.Probe(ctx, target, p, time.Second)
		}()
	}
	fts, err := tr.Trace(ctx, target, ports, TraceConfig{Probes: 3, MaxTTL: 4})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	for i, ft := range fts {
		if !ft.Reached || len(ft.Hops) != 1 || ft.Hops[0].Addr != loopback || ft.Received < 3 || ft.Received != ft.Sent {
			t.Errorf("flow %d: reached %v hops %+v e2e %d/%d, want loopback at TTL 1, all answered", ft.SourcePort, ft.Reached, ft.Hops, ft.Received, ft.Sent)
		}
		if results[i].Outcome != OK {
			t.Errorf("probe on traced flow %d: %v %v, want ok", ports[i], results[i].Outcome, results[i].Err)
		}
	}
	if _, err := tr.Trace(ctx, target, []uint16{9}, TraceConfig{}); err == nil {
		t.Error("trace from an unreserved port: no error")
	}
}
