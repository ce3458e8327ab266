package probe

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// RFC 5737 and RFC 3849 addresses: these tests send nothing.
var (
	testSrc  = netip.MustParseAddr("192.0.2.1")
	testDst  = netip.MustParseAddr("198.51.100.7")
	testSrc6 = netip.MustParseAddr("2001:db8::1")
	testDst6 = netip.MustParseAddr("2001:db8:7::7")
)

// testFamily is one address family's test addresses.
type testFamily struct {
	name     string
	ipv6     bool
	src, dst netip.Addr
}

var testFamilies = []testFamily{
	{"ipv4", false, testSrc, testDst},
	{"ipv6", true, testSrc6, testDst6},
}

func TestEchoRoundTrip(t *testing.T) {
	t.Parallel()
	for _, f := range testFamilies {
		t.Run(f.name, func(t *testing.T) {
			var buf [64]byte
			msg := encodeEcho(buf[:], f.ipv6, 0xbeef, 0x1234)
			request, reply := echoTypes(f.ipv6)
			if msg[0] != request || len(msg) != icmpHeaderLen+icmpPayloadLen {
				t.Fatalf("encoded echo: type %d, %d bytes; want type %d, 24 bytes", msg[0], len(msg), request)
			}
			// ICMPv6's checksum covers a pseudo-header: the kernel
			// fills it, and it must be left 0 for it.
			if got := checksum(msg); !f.ipv6 && got != 0 {
				t.Fatalf("checksum over encoded echo = %#x, want 0", got)
			}
			if f.ipv6 && (msg[2] != 0 || msg[3] != 0) {
				t.Fatalf("ICMPv6 echo checksum field %#x, want 0", msg[2:4])
			}
			rep := append([]byte(nil), msg...)
			rep[0] = reply
			r, ok := decodeEcho(rep, f.ipv6)
			if !ok || r.id != 0xbeef || r.seq != 0x1234 {
				t.Fatalf("decodeEcho = %+v, %v; want id beef seq 1234", r, ok)
			}
			if _, ok := decodeEcho(rep, !f.ipv6); ok {
				t.Error("the other family's decodeEcho accepted the reply")
			}
			for name, b := range map[string][]byte{
				"request":  msg,
				"short":    rep[:10],
				"no magic": append(append([]byte(nil), rep[:8]...), make([]byte, 16)...),
				"empty":    nil,
			} {
				if _, ok := decodeEcho(b, f.ipv6); ok {
					t.Errorf("decodeEcho(%s) accepted", name)
				}
			}
		})
	}
}

// synAck builds the answer a target would send to a SYN, as the raw
// socket's reader returns it: on IPv6, with the header it synthesizes.
func synAck(t testing.TB, from, to netip.Addr, sport, dport uint16, seq, ack uint32, syn, rst bool) []byte {
	t.Helper()
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), Seq: seq, Ack: ack, SYN: syn, ACK: true, RST: rst, Window: 1000}
	buf := gopacket.NewSerializeBuffer()
	if from.Is4() {
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: from.AsSlice(), DstIP: to.AsSlice()}
		tcp.SetNetworkLayerForChecksum(ip)
		if err := gopacket.SerializeLayers(buf, serializeOpts, ip, tcp); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	tcp.SetNetworkLayerForChecksum(&layers.IPv6{SrcIP: from.AsSlice(), DstIP: to.AsSlice()})
	if err := gopacket.SerializeLayers(buf, serializeOpts, tcp); err != nil {
		t.Fatal(err)
	}
	pkt := make([]byte, ipv6HeaderLen+len(buf.Bytes()))
	copy(pkt[ipv6HeaderLen:], buf.Bytes())
	src, dst := from.As16(), to.As16()
	putIPv6Header(pkt, len(buf.Bytes()), 6, &src, &dst)
	return pkt
}

// transportChecksum is the Internet checksum of a TCP segment with its
// pseudo-header (RFC 9293 §3.1, RFC 8200 §8.1): 0 when the segment's own
// checksum is right. Independent of gopacket's, which the encoder uses.
func transportChecksum(src, dst netip.Addr, seg []byte) uint16 {
	var ph []byte
	ph = append(ph, src.AsSlice()...)
	ph = append(ph, dst.AsSlice()...)
	if src.Is4() {
		ph = append(ph, 0, 6, byte(len(seg)>>8), byte(len(seg)))
	} else {
		ph = append(ph, 0, 0, byte(len(seg)>>8), byte(len(seg)), 0, 0, 0, 6)
	}
	return checksum(append(ph, seg...))
}

func TestSYNEncodeDecode(t *testing.T) {
	t.Parallel()
	e := newSYNEncoder()
	b, err := e.encode(synPacket{src: testSrc, dst: testDst, sport: 61000, dport: 9808, seq: 42, ttl: 7, ipID: 99})
	if err != nil {
		t.Fatal(err)
	}
	pkt := gopacket.NewPacket(b, layers.LayerTypeIPv4, gopacket.Default)
	ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if ip == nil || tcp == nil {
		t.Fatalf("encoded SYN does not decode: %v", pkt.ErrorLayer())
	}
	if ip.TTL != 7 || ip.Id != 99 || !tcp.SYN || tcp.ACK || tcp.Seq != 42 || tcp.SrcPort != 61000 || tcp.DstPort != 9808 {
		t.Errorf("fields: ttl %d id %d syn %v ack %v seq %d ports %d>%d", ip.TTL, ip.Id, tcp.SYN, tcp.ACK, tcp.Seq, tcp.SrcPort, tcp.DstPort)
	}
	if got := transportChecksum(testSrc, testDst, b[20:]); got != 0 || checksum(b[:20]) != 0 {
		t.Errorf("checksums: TCP %#x, IP %#x over the encoded SYN, want 0", got, checksum(b[:20]))
	}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	// Re-serialising with checksums must reproduce the same bytes.
	buf := gopacket.NewSerializeBuffer()
	gopacket.SerializeLayers(buf, serializeOpts, ip, tcp)
	if string(buf.Bytes()) != string(b) {
		t.Error("checksums of the encoded SYN are not what gopacket computes")
	}
	for _, p := range []synPacket{{src: testSrc6, dst: testDst}, {src: testSrc, dst: testDst6}, {src: netip.MustParseAddr("::ffff:192.0.2.1"), dst: testDst}} {
		if _, err := e.encode(p); err == nil {
			t.Errorf("%s > %s encoded", p.src, p.dst)
		}
	}
}

func TestSYNEncodeDecodeIPv6(t *testing.T) {
	t.Parallel()
	e := newSYNEncoder()
	for _, p := range []synPacket{
		{src: testSrc6, dst: testDst6, sport: 61000, dport: 9808, seq: 42, ttl: 7, ipID: 99},
		{src: testSrc6, dst: testDst6, sport: 61000, dport: 9808, seq: 43, ttl: 64, rst: true},
	} {
		b, err := e.encode(p)
		if err != nil {
			t.Fatal(err)
		}
		pkt := gopacket.NewPacket(b, layers.LayerTypeIPv6, gopacket.Default)
		ip, _ := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if ip == nil || tcp == nil {
			t.Fatalf("encoded SYN does not decode: %v", pkt.ErrorLayer())
		}
		label := FlowLabel(netip.AddrPortFrom(p.src, p.sport), netip.AddrPortFrom(p.dst, p.dport))
		if ip.Version != 6 || ip.HopLimit != p.ttl || ip.FlowLabel != label || label == 0 || ip.NextHeader != layers.IPProtocolTCP ||
			int(ip.Length) != len(b)-ipv6HeaderLen || ip.SrcIP.String() != p.src.String() || ip.DstIP.String() != p.dst.String() {
			t.Errorf("IPv6 header: %+v, want hop limit %d, flow label %#x, TCP, length %d", ip, p.ttl, label, len(b)-ipv6HeaderLen)
		}
		if tcp.SYN == p.rst || tcp.RST != p.rst || tcp.ACK || tcp.Seq != p.seq || tcp.SrcPort != 61000 || tcp.DstPort != 9808 {
			t.Errorf("TCP: syn %v rst %v ack %v seq %d ports %d>%d", tcp.SYN, tcp.RST, tcp.ACK, tcp.Seq, tcp.SrcPort, tcp.DstPort)
		}
		if got := transportChecksum(p.src, p.dst, b[ipv6HeaderLen:]); got != 0 {
			t.Errorf("TCP checksum with the IPv6 pseudo-header: %#x over the segment, want 0", got)
		}
		// The decoder reads what the encoder wrote.
		r, err := newTCPDecoder().decode(b)
		if err != nil || r.src != p.src || r.dst != p.dst || r.sport != p.sport || r.dport != p.dport || r.seq != p.seq || r.syn == p.rst || r.rst != p.rst {
			t.Errorf("decode = %+v, %v", r, err)
		}
	}
}

// TestFlowLabel: one label per flow, whatever the probe (SYN or RST,
// regular or traced at any TTL), never 0, and another for another flow.
func TestFlowLabel(t *testing.T) {
	t.Parallel()
	src, dst := netip.AddrPortFrom(testSrc6, 61000), netip.AddrPortFrom(testDst6, 9808)
	label := FlowLabel(src, dst)
	if label == 0 || label > 0xfffff {
		t.Fatalf("FlowLabel = %#x, want 20 bits, not 0", label)
	}
	e := newSYNEncoder()
	for _, p := range []synPacket{
		{seq: 1, ttl: 64},
		{seq: traceSeq(7, 1, 0), ttl: 1},
		{seq: traceSeq(7, 9, 2), ttl: 9},
		{seq: 5, ttl: 64, rst: true},
	} {
		p.src, p.dst, p.sport, p.dport = src.Addr(), dst.Addr(), src.Port(), dst.Port()
		b, err := e.encode(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := binary.BigEndian.Uint32(b) & 0xfffff; got != label {
			t.Errorf("probe %+v carries flow label %#x, the flow's is %#x", p, got, label)
		}
	}
	seen := map[uint32]string{label: "the flow"}
	for name, other := range map[string][2]netip.AddrPort{
		"source port":      {netip.AddrPortFrom(testSrc6, 61001), dst},
		"destination port": {src, netip.AddrPortFrom(testDst6, 9809)},
		"destination":      {src, netip.AddrPortFrom(netip.MustParseAddr("2001:db8:7::8"), 9808)},
		"source":           {netip.AddrPortFrom(netip.MustParseAddr("2001:db8::2"), 61000), dst},
		"reversed":         {dst, src},
	} {
		l := FlowLabel(other[0], other[1])
		if prev, dup := seen[l]; dup {
			t.Errorf("another %s: flow label %#x, the same as %s's", name, l, prev)
		}
		seen[l] = name
	}
	if l := FlowLabel(netip.AddrPortFrom(testSrc, 1), netip.AddrPortFrom(testDst, 2)); l != 0 {
		t.Errorf("IPv4 flow: label %#x, want 0", l)
	}
	// A flow whose hash folds to 0 still gets a label: find one.
	zero := false
search:
	for dport := range 64 {
		for sport := range 1 << 16 {
			s, d := netip.AddrPortFrom(testSrc6, uint16(sport)), netip.AddrPortFrom(testDst6, uint16(dport))
			if flowHash(s, d) != 0 {
				continue
			}
			zero = true
			if l := FlowLabel(s, d); l == 0 {
				t.Errorf("ports %d>%d: flow label 0", sport, dport)
			}
			break search
		}
	}
	if !zero {
		t.Error("no flow with a hash of 0 found to check")
	}
}

// fakeSYN is a TCPSYN with slots but no socket, for matching tests.
func fakeSYN(base uint16, n int) *TCPSYN { return fakeSYNFrom(testSrc, base, n) }

func fakeSYNFrom(src netip.Addr, base uint16, n int) *TCPSYN {
	t := &TCPSYN{src: src, base: base, slots: make([]synSlot, n)}
	for i := range t.slots {
		t.slots[i].reserved = true
		t.slots[i].ch = make(chan synAnswer, 1)
	}
	return t
}

func arm(s *synSlot, dst netip.Addr, dport uint16, seq uint32) {
	s.active, s.dst, s.dport, s.seq = true, dst, dport, seq
}

func TestSYNMatch(t *testing.T) {
	t.Parallel()
	for _, f := range testFamilies {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			testSYNMatch(t, f.src, f.dst)
		})
	}
}

func testSYNMatch(t *testing.T, src, dst netip.Addr) {
	const base = 61000
	cases := []struct {
		name    string
		arm     bool
		pkt     func(t testing.TB) []byte
		want    Outcome
		counter func(e *TCPSYN) uint64
	}{
		{"syn-ack", true, func(t testing.TB) []byte { return synAck(t, dst, src, 9808, base, 7, 101, true, false) }, OK, nil},
		{"rst", true, func(t testing.TB) []byte { return synAck(t, dst, src, 9808, base, 0, 101, false, true) }, Refused, nil},
		{"challenge ack", true, func(t testing.TB) []byte { return synAck(t, dst, src, 9808, base, 5, 77, false, false) }, OK, nil},
		{"wrong ack", true, func(t testing.TB) []byte { return synAck(t, dst, src, 9808, base, 7, 5, true, false) }, 0, func(e *TCPSYN) uint64 { return e.Late.Load() }},
		{"not in flight", false, func(t testing.TB) []byte { return synAck(t, dst, src, 9808, base, 7, 101, true, false) }, 0, func(e *TCPSYN) uint64 { return e.Late.Load() }},
		{"other target", true, func(t testing.TB) []byte { return synAck(t, src, src, 9808, base, 7, 101, true, false) }, 0, func(e *TCPSYN) uint64 { return e.Foreign.Load() }},
		{"other port", true, func(t testing.TB) []byte { return synAck(t, dst, src, 9808, base+50, 7, 101, true, false) }, 0, func(e *TCPSYN) uint64 { return e.Foreign.Load() }},
		{"garbage", true, func(testing.TB) []byte { return []byte{0x45, 0, 0} }, 0, func(e *TCPSYN) uint64 { return e.Malformed.Load() }},
		{"garbage v6", true, func(testing.TB) []byte { return []byte{0x60, 0, 0} }, 0, func(e *TCPSYN) uint64 { return e.Malformed.Load() }},
		{"v6 not tcp", true, func(t testing.TB) []byte {
			b := synAck(t, dst, src, 9808, base, 7, 101, true, false)
			b[0], b[6] = 0x60, 0 // a hop-by-hop header on IPv6; garbage on IPv4
			return b
		}, 0, func(e *TCPSYN) uint64 { return e.Malformed.Load() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := fakeSYNFrom(src, base, 4)
			if tc.arm {
				arm(&e.slots[0], dst, 9808, 100)
			}
			e.deliver(newTCPDecoder(), tc.pkt(t), time.Now())
			if tc.counter != nil {
				if got := tc.counter(e); got != 1 {
					t.Errorf("counter = %d, want 1", got)
				}
				select {
				case a := <-e.slots[0].ch:
					t.Errorf("unexpected answer %v", a.outcome)
				default:
				}
				return
			}
			select {
			case a := <-e.slots[0].ch:
				if a.outcome != tc.want {
					t.Errorf("outcome %v, want %v", a.outcome, tc.want)
				}
			default:
				t.Fatal("no answer delivered")
			}
			// The same answer again is late: the probe is no longer in flight.
			e.deliver(newTCPDecoder(), tc.pkt(t), time.Now())
			if e.Late.Load() != 1 {
				t.Errorf("second copy: late = %d, want 1", e.Late.Load())
			}
		})
	}
}

// TestSynthesizedHeader: what the IPv6 raw socket's reader makes of a
// payload and recvfrom's address is an IPv6 packet the decoders take.
func TestSynthesizedHeader(t *testing.T) {
	t.Parallel()
	full := synAck(t, testDst6, testSrc6, 9808, 61000, 7, 101, true, false)
	seg := full[ipv6HeaderLen:]
	buf := make([]byte, 1500)
	copy(buf[ipv6HeaderLen:], seg)
	from, to := testDst6.As16(), testSrc6.As16()
	putIPv6Header(buf, len(seg), 6, &from, &to)
	pkt := gopacket.NewPacket(buf[:ipv6HeaderLen+len(seg)], layers.LayerTypeIPv6, gopacket.Default)
	ip, _ := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if ip == nil || tcp == nil || ip.Version != 6 || int(ip.Length) != len(seg) || ip.NextHeader != layers.IPProtocolTCP ||
		ip.SrcIP.String() != testDst6.String() || ip.DstIP.String() != testSrc6.String() {
		t.Fatalf("synthesized header: %+v (%v)", ip, pkt.ErrorLayer())
	}
	if got := transportChecksum(testDst6, testSrc6, seg); got != 0 {
		t.Errorf("the segment's checksum does not hold under the synthesized addresses: %#x", got)
	}
	r, err := newTCPDecoder().decode(buf[:ipv6HeaderLen+len(seg)])
	if err != nil || r.src != testDst6 || r.dst != testSrc6 || r.sport != 9808 || r.dport != 61000 || !r.syn || !r.ackFlag || r.ack != 101 {
		t.Errorf("decode = %+v, %v", r, err)
	}
}

func FuzzDecodeTCP(f *testing.F) {
	for _, fam := range testFamilies {
		f.Add(synAck(f, fam.dst, fam.src, 9808, 61000, 7, 101, true, false))
		f.Add(synAck(f, fam.dst, fam.src, 9808, 61001, 0, 0, false, true))
	}
	f.Add([]byte{0x45})
	f.Add([]byte{0x4f, 0, 0, 20, 0, 0, 0, 0, 64, 6, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2})
	f.Add([]byte{0x60, 0, 0, 0, 0, 20, 6, 64})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, fam := range testFamilies {
			e := fakeSYNFrom(fam.src, 61000, 4)
			arm(&e.slots[0], fam.dst, 9808, 100)
			arm(&e.slots[1], fam.dst, 9808, 0)
			e.deliver(newTCPDecoder(), b, time.Now())
			total := e.Late.Load() + e.Foreign.Load() + e.Malformed.Load() + e.Duplicate.Load()
			delivered := len(e.slots[0].ch) + len(e.slots[1].ch)
			if total+uint64(delivered) != 1 {
				t.Fatalf("%s: a packet must be either delivered or counted once: counted %d, delivered %d", fam.name, total, delivered)
			}
		}
	})
}

func FuzzDecodeEcho(f *testing.F) {
	for _, fam := range testFamilies {
		var buf [64]byte
		msg := encodeEcho(buf[:], fam.ipv6, 1, 2)
		reply := append([]byte(nil), msg...)
		reply[0] = icmpEchoReply
		if fam.ipv6 {
			reply[0] = icmp6EchoReply
		}
		f.Add(reply)
		f.Add(append([]byte(nil), msg...))
	}
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, fam := range testFamilies {
			e := &ICMP{id: 1, ipv6: fam.ipv6, pending: map[uint16]*icmpWait{2: {dst: fam.dst, ch: make(chan time.Time, 1)}}}
			e.deliver(b, fam.dst, time.Now())
			counted := e.Late.Load() + e.Foreign.Load() + e.Malformed.Load() + e.Duplicate.Load()
			if counted+uint64(len(e.pending[2].ch)) != 1 {
				t.Fatalf("%s: a message must be either delivered or counted once: counted %d", fam.name, counted)
			}
		}
	})
}

// BenchmarkSYNEncodeMatch is the tcp_syn hot path: build a SYN, then decode
// and match its SYN-ACK. Goal (issue 2): >= 500k/s per core, 0 allocs/op.
func BenchmarkSYNEncodeMatch(b *testing.B) {
	for _, f := range testFamilies {
		b.Run(f.name, func(b *testing.B) {
			e := fakeSYNFrom(f.src, 61000, 1)
			enc := newSYNEncoder()
			dec := newTCPDecoder()
			reply := synAck(b, f.dst, f.src, 9808, 61000, 7, 101, true, false)
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				synEncodeMatch(b, e, enc, dec, f.dst, reply, now)
			}
		})
	}
}

// synEncodeMatch encodes a SYN from e's source to dst, then hands e the
// reply as its reader would: on IPv6 with the header synthesized.
func synEncodeMatch(tb testing.TB, e *TCPSYN, enc *synEncoder, dec *tcpDecoder, dst netip.Addr, reply []byte, now time.Time) {
	s := &e.slots[0]
	arm(s, dst, 9808, 100)
	if _, err := enc.encode(synPacket{src: e.src, dst: dst, sport: 61000, dport: 9808, seq: 100, ttl: 64, ipID: 1}); err != nil {
		tb.Fatal(err)
	}
	if !e.src.Is4() {
		from, to := dst.As16(), e.src.As16()
		putIPv6Header(reply, len(reply)-ipv6HeaderLen, 6, &from, &to)
	}
	e.deliver(dec, reply, now)
	if a := <-s.ch; a.outcome != OK {
		tb.Fatal(a.outcome)
	}
}

func TestSYNHotPathAllocs(t *testing.T) {
	for _, f := range testFamilies {
		e := fakeSYNFrom(f.src, 61000, 1)
		enc, dec := newSYNEncoder(), newTCPDecoder()
		reply := synAck(t, f.dst, f.src, 9808, 61000, 7, 101, true, false)
		now := time.Now()
		if n := testing.AllocsPerRun(1000, func() { synEncodeMatch(t, e, enc, dec, f.dst, reply, now) }); n != 0 {
			t.Errorf("%s: SYN encode + reply match allocates %v times per probe, want 0", f.name, n)
		}
	}
}

func BenchmarkEchoEncodeDecode(b *testing.B) {
	for _, f := range testFamilies {
		b.Run(f.name, func(b *testing.B) {
			var buf [64]byte
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				echoEncodeDecode(b, buf[:], f.ipv6, uint16(i))
			}
		})
	}
}

func echoEncodeDecode(tb testing.TB, buf []byte, ipv6 bool, seq uint16) {
	msg := encodeEcho(buf, ipv6, 1, seq)
	_, msg[0] = echoTypes(ipv6)
	if r, ok := decodeEcho(msg, ipv6); !ok || r.seq != seq {
		tb.Fatal("decode")
	}
}

func TestEchoAllocs(t *testing.T) {
	for _, f := range testFamilies {
		var buf [64]byte
		if n := testing.AllocsPerRun(1000, func() { echoEncodeDecode(t, buf[:], f.ipv6, 7) }); n != 0 {
			t.Errorf("%s: echo encode + decode allocates %v times, want 0", f.name, n)
		}
	}
}

// TestSizedSYN: a sized SYN is exactly size bytes of IP packet, Don't
// Fragment on IPv4, its TCP checksum over the padding, and a size at or
// below a plain SYN's (or a RST) pads nothing. Once grown, encoding does
// not allocate.
func TestSizedSYN(t *testing.T) {
	for _, f := range testFamilies {
		e := newSYNEncoder()
		plain, err := e.encode(synPacket{src: f.src, dst: f.dst, sport: 61000, dport: 9808, seq: 1, ttl: 64})
		if err != nil {
			t.Fatal(err)
		}
		plainLen := len(plain)
		for _, size := range []int{0, plainLen - 1, plainLen, 1200, 1500, MaxProbeSize, MaxProbeSize + 1} {
			b, err := e.encode(synPacket{src: f.src, dst: f.dst, sport: 61000, dport: 9808, seq: 1, ttl: 64, size: size})
			if err != nil {
				t.Fatal(err)
			}
			want := max(plainLen, min(size, MaxProbeSize))
			if len(b) != want {
				t.Errorf("%s: size %d encoded %d bytes, want %d", f.name, size, len(b), want)
			}
			first := layers.LayerTypeIPv4
			if f.ipv6 {
				first = layers.LayerTypeIPv6
			}
			pkt := gopacket.NewPacket(b, first, gopacket.Default)
			tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
			if tcp == nil || !tcp.SYN || len(tcp.Payload) != want-plainLen {
				t.Fatalf("%s: size %d: not a SYN carrying %d bytes: %v", f.name, size, want-plainLen, pkt)
			}
			if ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ip != nil && ip.Flags&layers.IPv4DontFragment == 0 {
				t.Errorf("%s: size %d sent without Don't Fragment", f.name, size)
			}
			hdr := 20
			if f.ipv6 {
				hdr = 40
			}
			if got := transportChecksum(f.src, f.dst, b[hdr:]); got != 0 {
				t.Errorf("%s: size %d: TCP checksum over the padded SYN is %#x, want 0", f.name, size, got)
			}
		}
		if b, _ := e.encode(synPacket{src: f.src, dst: f.dst, rst: true, size: 1500}); len(b) >= 1500 {
			t.Errorf("%s: a RST was padded to %d bytes", f.name, len(b))
		}
		if n := testing.AllocsPerRun(100, func() {
			if _, err := e.encode(synPacket{src: f.src, dst: f.dst, sport: 61000, dport: 9808, ttl: 64, size: 1400}); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: a sized SYN allocates %v times, want 0", f.name, n)
		}
	}
}

// BenchmarkSizedSYNEncode builds the large probe of a flow
// (probing.pmtu): a SYN padded to 1,500 bytes of IP packet.
func BenchmarkSizedSYNEncode(b *testing.B) {
	for _, f := range testFamilies {
		b.Run(f.name, func(b *testing.B) {
			e := newSYNEncoder()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.encode(synPacket{src: f.src, dst: f.dst, sport: 61000, dport: 9808, ttl: 64, size: 1500}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecodeTooBig: a "fragmentation needed" and a "packet too big"
// quoting one of our SYNs give its flow and the MTU; a Time Exceeded, a
// port unreachable and a truncated quote do not.
func TestDecodeTooBig(t *testing.T) {
	router := netip.MustParseAddr("192.0.2.254")
	router6 := netip.MustParseAddr("2001:db8::fe")
	e := newSYNEncoder()
	for _, f := range testFamilies {
		syn, err := e.encode(synPacket{src: f.src, dst: f.dst, sport: 61003, dport: 9808, seq: 77, ttl: 64, size: 1400})
		if err != nil {
			t.Fatal(err)
		}
		quoted := slices.Clone(syn[:min(len(syn), 600)])
		msg := func(typ, code uint8, mtu int) []byte {
			icmp := make([]byte, 8, 8+len(quoted))
			icmp[0], icmp[1] = typ, code
			if f.ipv6 {
				binary.BigEndian.PutUint32(icmp[4:], uint32(mtu))
			} else {
				binary.BigEndian.PutUint16(icmp[6:], uint16(mtu))
			}
			icmp = append(icmp, quoted...)
			if f.ipv6 {
				hdr := make([]byte, 40)
				hdr[0], hdr[6] = 0x60, 58
				copy(hdr[8:], router6.AsSlice())
				copy(hdr[24:], f.src.AsSlice())
				return append(hdr, icmp...)
			}
			hdr := make([]byte, 20)
			hdr[0], hdr[9] = 0x45, 1
			copy(hdr[12:], router.AsSlice())
			copy(hdr[16:], f.src.AsSlice())
			return append(hdr, icmp...)
		}
		tooBig, te, unreach := uint8(icmpDestUnreachable), uint8(icmpTimeExceeded), uint8(icmpDestUnreachable)
		code := uint8(icmpFragNeeded)
		if f.ipv6 {
			tooBig, te, unreach, code = icmp6PacketTooBig, icmp6TimeExceeded, icmp6DestUnreachable, 0
		}
		q, mtu, ok := decodeTooBig(msg(tooBig, code, 1300))
		if !ok || mtu != 1300 || q.src != f.src || q.dst != f.dst || q.sport != 61003 || q.dport != 9808 || q.seq != 77 {
			t.Errorf("%s: too big: %+v mtu %d ok %v", f.name, q, mtu, ok)
		}
		for name, b := range map[string][]byte{
			"time exceeded":    msg(te, 0, 1300),
			"port unreachable": msg(unreach, 3, 1300),
			"truncated":        msg(tooBig, code, 1300)[:50],
		} {
			if _, _, ok := decodeTooBig(b); ok {
				t.Errorf("%s: %s taken for a too big", f.name, name)
			}
		}
	}
}
