package probetest

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// DNSMode is how a DNSServer answers.
type DNSMode int32

// The modes.
const (
	DNSAnswer        DNSMode = iota // NOERROR, one A record
	DNSSilent                       // no answer at all
	DNSServFail                     // SERVFAIL
	DNSNXDomain                     // NXDOMAIN
	DNSTruncate                     // NOERROR with TC set
	DNSWrongID                      // NOERROR under another ID
	DNSWrongQuestion                // NOERROR to another name
)

// DNSServer answers type-A questions over UDP and TCP on one address, as
// a cluster's DNS would, in the mode set. It records the client 5-tuples
// it served (up to a bound) so tests can hold a flow to its port.
type DNSServer struct {
	Addr netip.AddrPort
	// Answer is the address every A record holds.
	Answer netip.Addr

	mode    atomic.Int32
	udp     *net.UDPConn
	tcp     *net.TCPListener
	wg      sync.WaitGroup
	queries atomic.Int64

	mu      sync.Mutex
	clients map[netip.AddrPort]int // per UDP or TCP client address, queries
	tcpSeen map[netip.AddrPort]int
}

// maxClients bounds the client addresses a DNSServer remembers.
const maxClients = 4096

// NewDNSServer serves on addr (port 0: any free one) until the test ends.
func NewDNSServer(t testing.TB, addr netip.AddrPort) *DNSServer {
	t.Helper()
	s := &DNSServer{Answer: netip.AddrFrom4([4]byte{192, 0, 2, 1}), clients: map[netip.AddrPort]int{}, tcpSeen: map[netip.AddrPort]int{}}
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatalf("dns server: %v", err)
	}
	s.tcp = ln
	s.Addr = ln.Addr().(*net.TCPAddr).AddrPort()
	s.udp, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(s.Addr))
	if err != nil {
		ln.Close()
		t.Fatalf("dns server: %v", err)
	}
	s.wg.Add(2)
	go s.serveUDP()
	go s.serveTCP()
	t.Cleanup(func() {
		s.udp.Close()
		s.tcp.Close()
		s.wg.Wait()
	})
	return s
}

// SetMode changes how the server answers from the next query on.
func (s *DNSServer) SetMode(m DNSMode) { s.mode.Store(int32(m)) }

// Queries is how many queries the server has read.
func (s *DNSServer) Queries() int64 { return s.queries.Load() }

// UDPClients and TCPClients are the client addresses served, with the
// queries each sent.
func (s *DNSServer) UDPClients() map[netip.AddrPort]int { return s.snapshot(s.clients) }

// TCPClients: see UDPClients.
func (s *DNSServer) TCPClients() map[netip.AddrPort]int { return s.snapshot(s.tcpSeen) }

func (s *DNSServer) snapshot(m map[netip.AddrPort]int) map[netip.AddrPort]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[netip.AddrPort]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (s *DNSServer) note(m map[netip.AddrPort]int, from netip.AddrPort) {
	s.mu.Lock()
	if _, ok := m[from]; ok || len(m) < maxClients {
		m[from]++
	}
	s.mu.Unlock()
}

func (s *DNSServer) serveUDP() {
	defer s.wg.Done()
	in, out := make([]byte, 1500), make([]byte, 0, 1500)
	for {
		n, from, err := s.udp.ReadFromUDPAddrPort(in)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		s.note(s.clients, from)
		reply, ok := s.answer(in[:n], out[:0])
		if ok {
			s.udp.WriteToUDPAddrPort(reply, from)
		}
	}
}

func (s *DNSServer) serveTCP() {
	defer s.wg.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := s.tcp.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		s.note(s.tcpSeen, c.RemoteAddr().(*net.TCPAddr).AddrPort())
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer c.Close()
			s.serveConn(c)
		}()
	}
}

func (s *DNSServer) serveConn(c *net.TCPConn) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	in, out := make([]byte, 2+1500), make([]byte, 2, 2+1500)
	for {
		if _, err := io.ReadFull(c, in[:2]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(in))
		if n > len(in)-2 {
			return
		}
		if _, err := io.ReadFull(c, in[2:2+n]); err != nil {
			return
		}
		reply, ok := s.answer(in[2:2+n], out[:2])
		if !ok {
			continue
		}
		binary.BigEndian.PutUint16(reply, uint16(len(reply)-2))
		if _, err := c.Write(reply); err != nil {
			return
		}
	}
}

// answer appends to out the reply to query in the server's mode; ok is
// false when the mode is silent or the query unreadable.
func (s *DNSServer) answer(query, out []byte) ([]byte, bool) {
	s.queries.Add(1)
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	mode := DNSMode(s.mode.Load())
	rh := dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true, Authoritative: true}
	switch mode {
	case DNSSilent:
		return nil, false
	case DNSServFail:
		rh.RCode = dnsmessage.RCodeServerFailure
	case DNSNXDomain:
		rh.RCode = dnsmessage.RCodeNameError
	case DNSTruncate:
		rh.Truncated = true
	case DNSWrongID:
		rh.ID++
	case DNSWrongQuestion:
		q.Name.Data[0] ^= 1
	}
	b := dnsmessage.NewBuilder(out, rh)
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	if mode == DNSAnswer && q.Type == dnsmessage.TypeA {
		err := b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}, dnsmessage.AResource{A: s.Answer.As4()})
		if err != nil {
			return nil, false
		}
	}
	reply, err := b.Finish()
	return reply, err == nil
}
