package probe

import (
	"errors"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/netprober/prober/api"
)

// synEncoder builds TCP SYN packets with their IP header (the socket has
// IP_HDRINCL or IPV6_HDRINCL, so the traceroute can set TTL, IPv4 ID and
// IPv6 flow label per packet). One per sending goroutine: it reuses its
// layers and buffer, so encoding does not allocate.
type synEncoder struct {
	ip   layers.IPv4
	ip6  layers.IPv6
	tcp  layers.TCP
	opts [1]layers.TCPOption
	mss  [2]byte
	// srcB and dstB back the layers' address slices, so setting them
	// does not move a local array to the heap.
	srcB, dstB [16]byte
	buf        gopacket.SerializeBuffer
	// pad is a sized SYN's payload (zeros), grown to the largest asked.
	pad gopacket.Payload
}

func newSYNEncoder() *synEncoder {
	e := &synEncoder{buf: gopacket.NewSerializeBufferExpectedSize(ipv6HeaderLen, 24)}
	e.mss = [2]byte{0x05, 0xb4} // 1460: a plain SYN as a kernel would send
	e.opts[0] = layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: e.mss[:]}
	e.ip = layers.IPv4{Version: 4, IHL: 5, Protocol: layers.IPProtocolTCP, Flags: layers.IPv4DontFragment}
	e.ip6 = layers.IPv6{Version: 6, NextHeader: layers.IPProtocolTCP}
	e.tcp = layers.TCP{SYN: true, Window: 64240, Options: e.opts[:]}
	return e
}

var serializeOpts = gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}

// synPacket describes one SYN.
type synPacket struct {
	src, dst     netip.Addr
	sport, dport uint16
	seq          uint32
	ttl          uint8  // the hop limit on IPv6
	ipID         uint16 // IPv4 only: IPv6 has no ID outside fragments
	// rst makes it a bare RST instead of a SYN (see TCPSYN.Probe).
	rst bool
	// size, when above a plain SYN's, pads the SYN with zeros to size
	// bytes of IP packet (ProbeSized). The target acknowledges the SYN
	// alone: without a Fast Open cookie its data is dropped.
	size int
}

// The header lengths of a plain SYN: a size at or below them pads
// nothing.
const (
	ipv4HeaderLen = 20
	synHeaderLen  = 24 // TCP header with the MSS option
)

// MaxProbeSize is the largest packet ProbeSized sends: a jumbo frame.
const MaxProbeSize = api.MaxProbeSize

// synPadding is the zero bytes a SYN from src carries to be size bytes
// of IP packet: 0 at or below a bare SYN's headers. A closed port's RST
// acknowledges them with the SYN (RFC 9293: SEG.SEQ + SEG.LEN), a
// SYN-ACK without Fast Open only the SYN.
func synPadding(src netip.Addr, size int) uint32 {
	hdr := ipv4HeaderLen + synHeaderLen
	if !src.Is4() {
		hdr = ipv6HeaderLen + synHeaderLen
	}
	return uint32(max(min(size, MaxProbeSize)-hdr, 0))
}

var errFamily = errors.New("tcp_syn: source and destination are not both IPv4 or both IPv6")

// encode returns the wire bytes of p. The slice is valid until the next
// call. An IPv6 packet carries the flow's FlowLabel.
func (e *synEncoder) encode(p synPacket) ([]byte, error) {
	if !sameFamily(p.src, p.dst) {
		return nil, errFamily
	}
	var ip gopacket.SerializableLayer
	if p.src.Is4() {
		a, b := p.src.As4(), p.dst.As4()
		copy(e.srcB[:], a[:])
		copy(e.dstB[:], b[:])
		e.ip.SrcIP = e.srcB[:4]
		e.ip.DstIP = e.dstB[:4]
		e.ip.TTL = p.ttl
		e.ip.Id = p.ipID
		if err := e.tcp.SetNetworkLayerForChecksum(&e.ip); err != nil {
			return nil, err
		}
		ip = &e.ip
	} else {
		e.srcB, e.dstB = p.src.As16(), p.dst.As16()
		e.ip6.SrcIP = e.srcB[:]
		e.ip6.DstIP = e.dstB[:]
		e.ip6.HopLimit = p.ttl
		e.ip6.FlowLabel = FlowLabel(netip.AddrPortFrom(p.src, p.sport), netip.AddrPortFrom(p.dst, p.dport))
		if err := e.tcp.SetNetworkLayerForChecksum(&e.ip6); err != nil {
			return nil, err
		}
		ip = &e.ip6
	}
	e.tcp.SrcPort = layers.TCPPort(p.sport)
	e.tcp.DstPort = layers.TCPPort(p.dport)
	e.tcp.Seq = p.seq
	e.tcp.SYN, e.tcp.RST = !p.rst, p.rst
	if p.rst {
		e.tcp.Options, e.tcp.Window = nil, 0
	} else {
		e.tcp.Options, e.tcp.Window = e.opts[:], 64240
	}
	if n := synPadding(p.src, p.size); n > 0 && !p.rst {
		if cap(e.pad) < int(n) {
			e.pad = make(gopacket.Payload, n)
		}
		e.pad = e.pad[:n]
		err := gopacket.SerializeLayers(e.buf, serializeOpts, ip, &e.tcp, &e.pad)
		return e.buf.Bytes(), err
	}
	if err := gopacket.SerializeLayers(e.buf, serializeOpts, ip, &e.tcp); err != nil {
		return nil, err
	}
	return e.buf.Bytes(), nil
}

// tcpReply is what the reader needs of a received TCP segment.
type tcpReply struct {
	src, dst     netip.Addr
	sport, dport uint16
	seq, ack     uint32
	syn, ackFlag bool
	rst          bool
}

// tcpDecoder parses IPv4+TCP or IPv6+TCP into preallocated layers
// (gopacket's DecodingLayerParser: no per-packet allocation). One per
// reader.
type tcpDecoder struct {
	ip      layers.IPv4
	ip6     layers.IPv6
	tcp     layers.TCP
	parser  *gopacket.DecodingLayerParser
	parser6 *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
}

func newTCPDecoder() *tcpDecoder {
	d := &tcpDecoder{decoded: make([]gopacket.LayerType, 0, 4)}
	d.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeIPv4, &d.ip, &d.tcp)
	d.parser.IgnoreUnsupported = true
	d.parser6 = gopacket.NewDecodingLayerParser(layers.LayerTypeIPv6, &d.ip6, &d.tcp)
	d.parser6.IgnoreUnsupported = true
	return d
}

var errNotTCP = errors.New("not a TCP segment")

// decode parses one IPv4 or IPv6 packet, by its version nibble. The
// returned reply holds copies, not aliases of b, so b may be reused at
// once.
func (d *tcpDecoder) decode(b []byte) (tcpReply, error) {
	parser, ip6 := d.parser, false
	if len(b) > 0 && b[0]>>4 == 6 {
		// The raw socket's header (putIPv6Header) names TCP itself:
		// the kernel has taken any extension headers off.
		if len(b) < ipv6HeaderLen || b[6] != byte(layers.IPProtocolTCP) {
			return tcpReply{}, errNotTCP
		}
		parser, ip6 = d.parser6, true
	}
	if err := parser.DecodeLayers(b, &d.decoded); err != nil {
		return tcpReply{}, err
	}
	if len(d.decoded) != 2 || d.decoded[1] != layers.LayerTypeTCP {
		return tcpReply{}, errNotTCP
	}
	srcIP, dstIP := d.ip.SrcIP, d.ip.DstIP
	if ip6 {
		srcIP, dstIP = d.ip6.SrcIP, d.ip6.DstIP
	}
	src, ok1 := netip.AddrFromSlice(srcIP)
	dst, ok2 := netip.AddrFromSlice(dstIP)
	if !ok1 || !ok2 {
		return tcpReply{}, errNotTCP
	}
	return tcpReply{
		src: src, dst: dst,
		sport: uint16(d.tcp.SrcPort), dport: uint16(d.tcp.DstPort),
		seq: d.tcp.Seq, ack: d.tcp.Ack,
		syn: d.tcp.SYN, ackFlag: d.tcp.ACK, rst: d.tcp.RST,
	}, nil
}
