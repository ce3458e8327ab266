package probe

import (
	"errors"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// synEncoder builds TCP SYN packets with their IPv4 header (the socket has
// IP_HDRINCL, so the traceroute can set TTL and IP ID per packet). One per
// sending goroutine: it reuses its layers and buffer, so encoding does not
// allocate.
type synEncoder struct {
	ip   layers.IPv4
	tcp  layers.TCP
	opts [1]layers.TCPOption
	mss  [2]byte
	// srcB and dstB back the layer's address slices, so setting them does
	// not move a local array to the heap.
	srcB, dstB [4]byte
	buf        gopacket.SerializeBuffer
}

func newSYNEncoder() *synEncoder {
	e := &synEncoder{buf: gopacket.NewSerializeBufferExpectedSize(20, 24)}
	e.mss = [2]byte{0x05, 0xb4} // 1460: a plain SYN as a kernel would send
	e.opts[0] = layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: e.mss[:]}
	e.ip = layers.IPv4{Version: 4, IHL: 5, Protocol: layers.IPProtocolTCP, Flags: layers.IPv4DontFragment}
	e.tcp = layers.TCP{SYN: true, Window: 64240, Options: e.opts[:]}
	return e
}

var serializeOpts = gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}

// synPacket describes one SYN.
type synPacket struct {
	src, dst     netip.Addr
	sport, dport uint16
	seq          uint32
	ttl          uint8
	ipID         uint16
	// rst makes it a bare RST instead of a SYN (see TCPSYN.Probe).
	rst bool
}

// encode returns the wire bytes of p. The slice is valid until the next
// call.
func (e *synEncoder) encode(p synPacket) ([]byte, error) {
	if !p.src.Is4() || !p.dst.Is4() {
		return nil, errors.New("tcp_syn: IPv4 addresses only")
	}
	e.srcB, e.dstB = p.src.As4(), p.dst.As4()
	e.ip.SrcIP = e.srcB[:]
	e.ip.DstIP = e.dstB[:]
	e.ip.TTL = p.ttl
	e.ip.Id = p.ipID
	e.tcp.SrcPort = layers.TCPPort(p.sport)
	e.tcp.DstPort = layers.TCPPort(p.dport)
	e.tcp.Seq = p.seq
	e.tcp.SYN, e.tcp.RST = !p.rst, p.rst
	if p.rst {
		e.tcp.Options, e.tcp.Window = nil, 0
	} else {
		e.tcp.Options, e.tcp.Window = e.opts[:], 64240
	}
	if err := e.tcp.SetNetworkLayerForChecksum(&e.ip); err != nil {
		return nil, err
	}
	if err := gopacket.SerializeLayers(e.buf, serializeOpts, &e.ip, &e.tcp); err != nil {
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

// tcpDecoder parses IPv4+TCP into preallocated layers (gopacket's
// DecodingLayerParser: no per-packet allocation). One per reader.
type tcpDecoder struct {
	ip      layers.IPv4
	tcp     layers.TCP
	parser  *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
}

func newTCPDecoder() *tcpDecoder {
	d := &tcpDecoder{decoded: make([]gopacket.LayerType, 0, 4)}
	d.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeIPv4, &d.ip, &d.tcp)
	d.parser.IgnoreUnsupported = true
	return d
}

var errNotTCP = errors.New("not an IPv4 TCP segment")

// decode parses one IPv4 packet. The returned reply holds copies, not
// aliases of b, so b may be reused at once.
func (d *tcpDecoder) decode(b []byte) (tcpReply, error) {
	if err := d.parser.DecodeLayers(b, &d.decoded); err != nil {
		return tcpReply{}, err
	}
	if len(d.decoded) != 2 || d.decoded[1] != layers.LayerTypeTCP {
		return tcpReply{}, errNotTCP
	}
	src, ok1 := netip.AddrFromSlice(d.ip.SrcIP)
	dst, ok2 := netip.AddrFromSlice(d.ip.DstIP)
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
