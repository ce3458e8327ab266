package probe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// RFC 5737 addresses: these tests send nothing.
var (
	testSrc = netip.MustParseAddr("192.0.2.1")
	testDst = netip.MustParseAddr("198.51.100.7")
)

func TestEchoRoundTrip(t *testing.T) {
	t.Parallel()
	var buf [64]byte
	msg := encodeEcho(buf[:], 0xbeef, 0x1234)
	if got := checksum(msg); got != 0 {
		t.Fatalf("checksum over encoded echo = %#x, want 0", got)
	}
	reply := append([]byte(nil), msg...)
	reply[0] = icmpEchoReply
	r, ok := decodeEcho(reply)
	if !ok || r.id != 0xbeef || r.seq != 0x1234 {
		t.Fatalf("decodeEcho = %+v, %v; want id beef seq 1234", r, ok)
	}
	for name, b := range map[string][]byte{
		"request":  msg,
		"short":    reply[:10],
		"no magic": append(append([]byte(nil), reply[:8]...), make([]byte, 16)...),
		"empty":    nil,
	} {
		if _, ok := decodeEcho(b); ok {
			t.Errorf("decodeEcho(%s) accepted", name)
		}
	}
}

// synAck builds the answer a target would send to a SYN.
func synAck(t testing.TB, from, to netip.Addr, sport, dport uint16, seq, ack uint32, syn, rst bool) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: from.AsSlice(), DstIP: to.AsSlice()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), Seq: seq, Ack: ack, SYN: syn, ACK: true, RST: rst, Window: 1000}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, serializeOpts, ip, tcp); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
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
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	// Re-serialising with checksums must reproduce the same bytes.
	buf := gopacket.NewSerializeBuffer()
	gopacket.SerializeLayers(buf, serializeOpts, ip, tcp)
	if string(buf.Bytes()) != string(b) {
		t.Error("checksums of the encoded SYN are not what gopacket computes")
	}
	if _, err := e.encode(synPacket{src: netip.MustParseAddr("2001:db8::1"), dst: testDst}); err == nil {
		t.Error("IPv6 source accepted")
	}
}

// fakeSYN is a TCPSYN with slots but no socket, for matching tests.
func fakeSYN(base uint16, n int) *TCPSYN {
	t := &TCPSYN{src: testSrc, base: base, slots: make([]synSlot, n)}
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
	const base = 61000
	cases := []struct {
		name    string
		arm     bool
		pkt     func(t testing.TB) []byte
		want    Outcome
		counter func(e *TCPSYN) uint64
	}{
		{"syn-ack", true, func(t testing.TB) []byte { return synAck(t, testDst, testSrc, 9808, base, 7, 101, true, false) }, OK, nil},
		{"rst", true, func(t testing.TB) []byte { return synAck(t, testDst, testSrc, 9808, base, 0, 101, false, true) }, Refused, nil},
		{"challenge ack", true, func(t testing.TB) []byte { return synAck(t, testDst, testSrc, 9808, base, 5, 77, false, false) }, OK, nil},
		{"wrong ack", true, func(t testing.TB) []byte { return synAck(t, testDst, testSrc, 9808, base, 7, 5, true, false) }, 0, func(e *TCPSYN) uint64 { return e.Late.Load() }},
		{"not in flight", false, func(t testing.TB) []byte { return synAck(t, testDst, testSrc, 9808, base, 7, 101, true, false) }, 0, func(e *TCPSYN) uint64 { return e.Late.Load() }},
		{"other target", true, func(t testing.TB) []byte { return synAck(t, testSrc, testSrc, 9808, base, 7, 101, true, false) }, 0, func(e *TCPSYN) uint64 { return e.Foreign.Load() }},
		{"other port", true, func(t testing.TB) []byte { return synAck(t, testDst, testSrc, 9808, base+50, 7, 101, true, false) }, 0, func(e *TCPSYN) uint64 { return e.Foreign.Load() }},
		{"garbage", true, func(testing.TB) []byte { return []byte{0x45, 0, 0} }, 0, func(e *TCPSYN) uint64 { return e.Malformed.Load() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := fakeSYN(base, 4)
			if tc.arm {
				arm(&e.slots[0], testDst, 9808, 100)
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

func FuzzDecodeTCP(f *testing.F) {
	f.Add(synAck(f, testDst, testSrc, 9808, 61000, 7, 101, true, false))
	f.Add(synAck(f, testDst, testSrc, 9808, 61001, 0, 0, false, true))
	f.Add([]byte{0x45})
	f.Add([]byte{0x4f, 0, 0, 20, 0, 0, 0, 0, 64, 6, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		e := fakeSYN(61000, 4)
		arm(&e.slots[0], testDst, 9808, 100)
		arm(&e.slots[1], testDst, 9808, 0)
		e.deliver(newTCPDecoder(), b, time.Now())
		total := e.Late.Load() + e.Foreign.Load() + e.Malformed.Load() + e.Duplicate.Load()
		delivered := len(e.slots[0].ch) + len(e.slots[1].ch)
		if total+uint64(delivered) != 1 {
			t.Fatalf("a packet must be either delivered or counted once: counted %d, delivered %d", total, delivered)
		}
	})
}

func FuzzDecodeEcho(f *testing.F) {
	var buf [64]byte
	msg := encodeEcho(buf[:], 1, 2)
	reply := append([]byte(nil), msg...)
	reply[0] = icmpEchoReply
	f.Add(reply)
	f.Add(msg)
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		e := &ICMP{id: 1, pending: map[uint16]*icmpWait{2: {dst: testDst, ch: make(chan time.Time, 1)}}}
		e.deliver(b, testDst, time.Now())
		counted := e.Late.Load() + e.Foreign.Load() + e.Malformed.Load() + e.Duplicate.Load()
		if counted+uint64(len(e.pending[2].ch)) != 1 {
			t.Fatalf("a message must be either delivered or counted once: counted %d", counted)
		}
	})
}

// BenchmarkSYNEncodeMatch is the tcp_syn hot path: build a SYN, then decode
// and match its SYN-ACK. Goal (issue 2): >= 500k/s per core, 0 allocs/op.
func BenchmarkSYNEncodeMatch(b *testing.B) {
	e := fakeSYN(61000, 1)
	enc := newSYNEncoder()
	dec := newTCPDecoder()
	reply := synAck(b, testDst, testSrc, 9808, 61000, 7, 101, true, false)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		synEncodeMatch(b, e, enc, dec, reply, now)
	}
}

func synEncodeMatch(tb testing.TB, e *TCPSYN, enc *synEncoder, dec *tcpDecoder, reply []byte, now time.Time) {
	s := &e.slots[0]
	arm(s, testDst, 9808, 100)
	if _, err := enc.encode(synPacket{src: testSrc, dst: testDst, sport: 61000, dport: 9808, seq: 100, ttl: 64, ipID: 1}); err != nil {
		tb.Fatal(err)
	}
	e.deliver(dec, reply, now)
	if a := <-s.ch; a.outcome != OK {
		tb.Fatal(a.outcome)
	}
}

func TestSYNHotPathAllocs(t *testing.T) {
	e := fakeSYN(61000, 1)
	enc, dec := newSYNEncoder(), newTCPDecoder()
	reply := synAck(t, testDst, testSrc, 9808, 61000, 7, 101, true, false)
	now := time.Now()
	if n := testing.AllocsPerRun(1000, func() { synEncodeMatch(t, e, enc, dec, reply, now) }); n != 0 {
		t.Errorf("SYN encode + reply match allocates %v times per probe, want 0", n)
	}
}

func BenchmarkEchoEncodeDecode(b *testing.B) {
	var buf [64]byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		msg := encodeEcho(buf[:], 1, uint16(i))
		msg[0] = icmpEchoReply
		if _, ok := decodeEcho(msg); !ok {
			b.Fatal("decode")
		}
	}
}
