package probe

import (
	"context"
	"encoding/binary"
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
// quoting the IP header and the first quote bytes of TCP; on IPv6 an
// ICMPv6 error under the header the raw socket's reader synthesizes.
func timeExceeded(t testing.TB, router, to netip.Addr, typ, code uint8, p synPacket, quote int) []byte {
	t.Helper()
	syn, err := newSYNEncoder().encode(p)
	if err != nil {
		t.Fatal(err)
	}
	iplen := 20
	if !p.src.Is4() {
		iplen = ipv6HeaderLen
	}
	body := make([]byte, 8, 8+iplen+quote)
	body[0], body[1] = typ, code
	body = append(body, syn[:iplen+quote]...)
	if !router.Is4() {
		// The kernel checks the ICMPv6 checksum before the reader
		// sees the message; nothing after it does.
		pkt := make([]byte, ipv6HeaderLen, ipv6HeaderLen+len(body))
		from, dst := router.As16(), to.As16()
		putIPv6Header(pkt, len(body), 58, &from, &dst)
		return append(pkt, body...)
	}
	binary.BigEndian.PutUint16(body[2:], checksum(body))
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: router.AsSlice(), DstIP: to.AsSlice()}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, serializeOpts, ip, gopacket.Payload(body)); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

var (
	testRouter  = netip.MustParseAddr("203.0.113.1")
	testRouter6 = netip.MustParseAddr("2001:db8:1::1")
)

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

func TestDecodeQuoteIPv6(t *testing.T) {
	t.Parallel()
	seq := traceSeq(0xbeef, 3, 2)
	p := synPacket{src: testSrc6, dst: testDst6, sport: 61000, dport: 9808, seq: seq, ttl: 1}
	label := FlowLabel(netip.AddrPortFrom(testSrc6, 61000), netip.AddrPortFrom(testDst6, 9808))
	for _, tc := range []struct {
		typ   uint8
		quote int
	}{{icmp6TimeExceeded, 8}, {icmp6TimeExceeded, 20}, {icmp6TimeExceeded, 24}, {icmp6DestUnreachable, 24}, {icmp6PacketTooBig, 24}} {
		b := timeExceeded(t, testRouter6, testSrc6, tc.typ, 4, p, tc.quote)
		q, ok := decodeQuote(b)
		if !ok {
			t.Fatalf("type %d, quote of %d TCP bytes: not decoded", tc.typ, tc.quote)
		}
		want := icmpQuote{from: testRouter6, to: testSrc6, typ: tc.typ, code: 4, src: testSrc6, dst: testDst6,
			flowLabel: label, sport: 61000, dport: 9808, seq: seq, quotedTTL: 1, quotedSize: ipv6HeaderLen + tc.quote}
		if q != want {
			t.Errorf("type %d, quote of %d TCP bytes:\n got %+v\nwant %+v", tc.typ, tc.quote, q, want)
		}
		if q.unreachable() != (tc.typ != icmp6TimeExceeded) {
			t.Errorf("type %d: unreachable() = %v", tc.typ, q.unreachable())
		}
	}
	good := timeExceeded(t, testRouter6, testSrc6, icmp6TimeExceeded, 0, p, 8)
	edit := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	const inner = ipv6HeaderLen + 8 // the quoted header's offset
	for name, b := range map[string][]byte{
		"short quote":           good[:len(good)-1],
		"quoted header only":    good[:inner+ipv6HeaderLen],
		"no quote":              good[:inner],
		"no icmp header":        good[:ipv6HeaderLen+4],
		"echo reply":            edit(func(b []byte) { b[ipv6HeaderLen] = icmp6EchoReply }),
		"ipv4 time exceeded":    edit(func(b []byte) { b[ipv6HeaderLen] = icmpTimeExceeded }),
		"outer not icmpv6":      edit(func(b []byte) { b[6] = 6 }),
		"quote is udp":          edit(func(b []byte) { b[inner+6] = 17 }),
		"quote has hop-by-hop":  edit(func(b []byte) { b[inner+6] = 0 }),
		"quote has routing hdr": edit(func(b []byte) { b[inner+6] = 43 }),
		"quote is ipv4":         edit(func(b []byte) { b[inner] = 0x45 }),
		"empty":                 nil,
		"version only":          {0x60},
	} {
		if q, ok := decodeQuote(b); ok {
			t.Errorf("decodeQuote(%s) accepted: %+v", name, q)
		}
	}
}

// TestICMPAnswer: an ICMP error counts for a traced flow only when it
// quotes exactly a probe of it: the IP ID on IPv4, the flow label on
// IPv6.
func TestICMPAnswer(t *testing.T) {
	t.Parallel()
	for _, f := range testFamilies {
		router := testRouter
		te := uint8(icmpTimeExceeded)
		if f.ipv6 {
			router, te = testRouter6, icmp6TimeExceeded
		}
		label := FlowLabel(netip.AddrPortFrom(f.src, 61000), netip.AddrPortFrom(f.dst, 9808))
		seq := traceSeq(0xbeef, 2, 0)
		probe := synPacket{src: f.src, dst: f.dst, sport: 61000, dport: 9808, seq: seq, ttl: 1, ipID: traceIPID(2, 0)}
		for _, tc := range []struct {
			name    string
			edit    func(q []byte)
			answer  bool
			foreign bool
		}{
			{"exact", nil, true, false},
			{"wrong flow label", func(q []byte) {
				if f.ipv6 {
					q[1] ^= 0x01 // the label's top 4 bits share byte 1 with the traffic class
				} else {
					q[1] = 0 // the TOS: not matched on IPv4
				}
			}, !f.ipv6, f.ipv6},
			{"wrong ip id", func(q []byte) {
				if !f.ipv6 {
					q[5] ^= 1
				} else {
					q[0] ^= 0x08 // the traffic class: not matched
				}
			}, f.ipv6, !f.ipv6},
			{"wrong destination port", func(q []byte) {
				off := 20
				if f.ipv6 {
					off = ipv6HeaderLen
				}
				q[off+3] ^= 1
			}, false, true},
		} {
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				tr := &Tracer{syn: fakeSYNFrom(f.src, 61000, 1), flows: map[uint16]*flowRun{}}
				fr := &flowRun{tr: tr, sport: 61000, dst: f.dst, dport: 9808, nonce: 0xbeef, flowLabel: label,
					timeout: time.Second, wake: make(chan struct{}, 1), probes: [][]probeRec{make([]probeRec, 1), make([]probeRec, 1)}}
				fr.probes[1][0] = probeRec{sent: time.Now(), pending: true}
				fr.outstanding = 1
				tr.flows[61000] = fr
				pkt := timeExceeded(t, router, f.src, te, 0, probe, 8)
				if tc.edit != nil {
					quoteOff := 20 + 8
					if f.ipv6 {
						quoteOff = ipv6HeaderLen + 8
					}
					tc.edit(pkt[quoteOff:])
				}
				tr.deliver(pkt, time.Now())
				got := fr.probes[1][0]
				if answered := got.kind == answerTimeExceeded && got.from == router; answered != tc.answer {
					t.Errorf("answered %v (%+v), want %v", answered, got, tc.answer)
				}
				if foreign := tr.Foreign.Load() == 1; foreign != tc.foreign {
					t.Errorf("counted foreign %v, want %v", foreign, tc.foreign)
				}
			})
		}
	}
}

func TestDecodeQuoteAllocs(t *testing.T) {
	for _, f := range testFamilies {
		b := quoteFor(t, f)
		if n := testing.AllocsPerRun(1000, func() {
			if _, ok := decodeQuote(b); !ok {
				t.Fatal("not decoded")
			}
		}); n != 0 {
			t.Errorf("%s: decodeQuote: %v allocs, want 0", f.name, n)
		}
	}
}

// quoteFor is a Time Exceeded of family f quoting 8 bytes of a probe.
func quoteFor(t testing.TB, f testFamily) []byte {
	if f.ipv6 {
		return timeExceeded(t, testRouter6, f.src, icmp6TimeExceeded, 0, synPacket{src: f.src, dst: f.dst, sport: 1, dport: 2, seq: 3, ttl: 1}, 8)
	}
	return timeExceeded(t, testRouter, f.src, icmpTimeExceeded, 0, synPacket{src: f.src, dst: f.dst, sport: 1, dport: 2, seq: 3, ttl: 1}, 8)
}

func BenchmarkDecodeQuote(b *testing.B) {
	for _, f := range testFamilies {
		b.Run(f.name, func(b *testing.B) {
			pkt := quoteFor(b, f)
			b.ReportAllocs()
			for b.Loop() {
				decodeQuote(pkt)
			}
		})
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
		if q, mtu, ok := decodeTooBig(b); ok && (mtu < 0 || q.src.Is4() && (q.typ != icmpDestUnreachable || q.code != icmpFragNeeded) || !q.src.Is4() && q.typ != icmp6PacketTooBig) {
			t.Fatalf("took %+v (mtu %d) for a too big", q, mtu)
		}
		q, ok := decodeQuote(b)
		if !ok {
			return
		}
		if q.src.Is4() && q.typ != icmpTimeExceeded && q.typ != icmpDestUnreachable ||
			!q.src.Is4() && q.typ != icmp6TimeExceeded && q.typ != icmp6DestUnreachable {
			t.Fatalf("accepted ICMP type %d", q.typ)
		}
		if q.src.Is4() {
			if !q.from.Is4() || !q.to.Is4() || !q.dst.Is4() || q.quotedSize < 28 || q.flowLabel != 0 {
				t.Fatalf("accepted %+v", q)
			}
			return
		}
		if !q.from.Is6() || !q.to.Is6() || !q.dst.Is6() || q.quotedSize < ipv6HeaderLen+8 || q.ipID != 0 || q.flowLabel > 0xfffff {
			t.Fatalf("accepted %+v", q)
		}
	})
}

// TestQuoteSeeds checks the fuzz seeds still mean what their names say:
// bad-* must be rejected, the others decoded.
func TestQuoteSeeds(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/quotes/*.bin")
	if len(files) < 7 {
		t.Fatalf("%d seeds in testdata/quotes, want at least 7 (both families)", len(files))
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
	for i, lo := range loopbacks {
		t.Run(lo.name, func(t *testing.T) {
			_, port := listen(t, lo.addr)
			target := Target{Addr: lo.addr, Port: port}
			e := startTCPSYN(t, lo.addr, 61200+uint16(i)*16, 4)
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
				if !ft.Reached || len(ft.Hops) != 1 || ft.Hops[0].Addr != lo.addr || ft.Received < 3 || ft.Received != ft.Sent {
					t.Errorf("flow %d: reached %v hops %+v e2e %d/%d, want loopback at TTL 1, all answered", ft.SourcePort, ft.Reached, ft.Hops, ft.Received, ft.Sent)
				}
				if results[i].Outcome != OK {
					t.Errorf("probe on traced flow %d: %v %v, want ok", ports[i], results[i].Outcome, results[i].Err)
				}
			}
			if _, err := tr.Trace(ctx, target, []uint16{9}, TraceConfig{}); err == nil {
				t.Error("trace from an unreserved port: no error")
			}
			if _, err := tr.Trace(ctx, Target{Addr: loopbacks[1-i].addr, Port: port}, ports[:1], TraceConfig{}); err == nil {
				t.Error("trace to the other family: no error")
			}
		})
	}
}
