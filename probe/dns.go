package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
)

// DNSConfig is one DNS flow: a query from Source to Server over UDP or
// TCP.
type DNSConfig struct {
	Source netip.Addr
	Server netip.AddrPort
	// Query is the name asked, type A: DefaultDNSQuery when empty.
	Query string
	TCP   bool
}

// DNSFlow asks one DNS server one question over one fixed 5-tuple, as
// TCPSYN's flows do, so ECMP keeps it on one path: over UDP a socket
// held for the flow's life, over TCP a connection per probe from the
// same source port, closed with a reset so that no TIME_WAIT holds the
// port. A flow that fails dnsFailuresToMove times in a row moves to a
// new source port (see there). Outcomes: OK (NOERROR), Lost (no answer in the timeout),
// AnswerError (an rcode, a truncation, a wrong ID: Reason says which),
// Refused (ICMP unreachable or a reset). Probes of one flow must not
// overlap; Close may be called at any time and ends a probe in flight.
type DNSFlow struct {
	cfg   DNSConfig
	q     dnsQuery
	buf   []byte
	dialr net.Dialer // tcp

	mu     sync.Mutex
	udp    *net.UDPConn // udp: the flow's socket
	tcp    *net.TCPConn // tcp: the connection of the probe in flight
	port   uint16       // the flow's source port, 0 until the first tcp probe
	prev   uint16       // the previous probe's ID: its late answer is not an error
	failed int          // probes lost or refused in a row
	closed bool
}

// dnsFailuresToMove is how many probes in a row may be lost or refused
// before the flow moves to a new source port. A conntrack entry made
// while a Service had no endpoints (kube-proxy rejects, nothing is
// DNATed; over TCP a SYN_SENT entry) outlives their return for as long as
// packets refresh it, and a fixed 5-tuple asked every second refreshes it
// for ever: the real cluster's lookups to the DNS VIP kept losing for
// minutes after its endpoints were back, over UDP and then over TCP. A
// resolver asks each lookup from a new port and never meets it; random
// loss rarely fails three in a row.
const dnsFailuresToMove = 3

// NewDNSFlow opens a flow: over UDP its socket, which fixes its source
// port; over TCP nothing until the first probe.
func NewDNSFlow(cfg DNSConfig) (*DNSFlow, error) {
	if !cfg.Server.IsValid() || !cfg.Source.IsValid() || !sameFamily(cfg.Source, cfg.Server.Addr()) {
		return nil, fmt.Errorf("dns: source %s cannot ask server %s", cfg.Source, cfg.Server)
	}
	if cfg.Query == "" {
		cfg.Query = DefaultDNSQuery
	}
	q, err := newDNSQuery(cfg.Query, cfg.TCP)
	if err != nil {
		return nil, fmt.Errorf("dns: query %w", err)
	}
	f := &DNSFlow{cfg: cfg, q: q, buf: make([]byte, maxDNSMessage)}
	if cfg.TCP {
		f.dialr = net.Dialer{Control: reuseAddr}
		return f, nil
	}
	f.udp, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(cfg.Source, 0)), net.UDPAddrFromAddrPort(cfg.Server))
	if err != nil {
		return nil, fmt.Errorf("dns: udp socket: %w", err)
	}
	f.port = uint16(f.udp.LocalAddr().(*net.UDPAddr).Port)
	return f, nil
}

// SourcePort is the flow's source port, 0 before a TCP flow's first
// probe.
func (f *DNSFlow) SourcePort() uint16 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.port
}

// Close ends the flow and any probe in flight.
func (f *DNSFlow) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.udp != nil {
		return f.udp.Close()
	}
	if f.tcp != nil {
		f.tcp.Close()
	}
	return nil
}

// Probe asks the question once and waits up to timeout for the answer.
func (f *DNSFlow) Probe(ctx context.Context, timeout time.Duration) Result {
	if f.failed >= dnsFailuresToMove {
		if r, ok := f.move(); !ok {
			return r
		}
	}
	id := uint16(rand.Uint32())
	if id == f.prev {
		id++
	}
	f.q.setID(id)
	var r Result
	if f.cfg.TCP {
		r = f.probeTCP(ctx, id, timeout)
	} else {
		r = f.probeUDP(id, timeout)
	}
	f.prev = id
	if r.Outcome == Lost || r.Outcome == Refused {
		f.failed++
	} else {
		f.failed = 0
	}
	return r
}

// move puts the flow on a new source port: a new UDP socket; over TCP
// the next connection binds an ephemeral port.
func (f *DNSFlow) move() (Result, bool) {
	if f.cfg.TCP {
		f.mu.Lock()
		f.port, f.failed = 0, 0
		f.mu.Unlock()
		return Result{}, true
	}
	c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(f.cfg.Source, 0)), net.UDPAddrFromAddrPort(f.cfg.Server))
	if err != nil {
		return Result{Outcome: LocalError, Reason: "socket", Err: err}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		c.Close()
		return Result{Outcome: LocalError, Reason: "closed", Err: net.ErrClosed}, false
	}
	f.udp.Close()
	f.udp = c
	f.port = uint16(c.LocalAddr().(*net.UDPAddr).Port)
	f.failed = 0
	return Result{}, true
}

func (f *DNSFlow) probeUDP(id uint16, timeout time.Duration) Result {
	start := time.Now()
	if err := f.udp.SetDeadline(start.Add(timeout)); err != nil {
		return dnsLocalError(err)
	}
	if _, err := f.udp.Write(f.q.msg); err != nil {
		return f.ioResult(err, start, "send")
	}
	for {
		n, err := f.udp.Read(f.buf)
		if err != nil {
			return f.ioResult(err, start, "receive")
		}
		if got, ok := dnsAnswerID(f.buf[:n]); ok && got == f.prev && got != id {
			continue // the previous probe's late answer
		}
		return f.answered(f.buf[:n], id, start)
	}
}

func (f *DNSFlow) probeTCP(ctx context.Context, id uint16, timeout time.Duration) Result {
	start := time.Now()
	ctx, cancel := context.WithDeadline(ctx, start.Add(timeout))
	defer cancel()
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return Result{Outcome: LocalError, Reason: "closed", Err: net.ErrClosed}
	}
	f.dialr.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(f.cfg.Source, f.port))
	f.mu.Unlock()
	c, err := f.dialr.DialContext(ctx, "tcp", f.cfg.Server.String())
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EADDRNOTAVAIL) {
			// Another socket took the flow's port between probes: the
			// next probe starts the flow again on a new one.
			f.mu.Lock()
			f.port = 0
			f.mu.Unlock()
			return Result{Outcome: LocalError, Reason: "port_busy", Err: err}
		}
		return f.ioResult(err, start, "connect")
	}
	conn := c.(*net.TCPConn)
	conn.SetLinger(0) // close with a reset: no TIME_WAIT holds the port
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		conn.Close()
		return Result{Outcome: LocalError, Reason: "closed", Err: net.ErrClosed}
	}
	f.tcp = conn
	f.port = uint16(conn.LocalAddr().(*net.TCPAddr).Port)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.tcp = nil
		f.mu.Unlock()
		conn.Close()
	}()
	if err := conn.SetDeadline(start.Add(timeout)); err != nil {
		return dnsLocalError(err)
	}
	if _, err := conn.Write(f.q.msg); err != nil {
		return f.ioResult(err, start, "send")
	}
	if _, err := io.ReadFull(conn, f.buf[:2]); err != nil {
		return f.ioResult(err, start, "receive")
	}
	n := int(f.buf[0])<<8 | int(f.buf[1])
	if n > len(f.buf) {
		return Result{Outcome: AnswerError, Reason: ReasonMalformed, RTT: time.Since(start)}
	}
	if _, err := io.ReadFull(conn, f.buf[:n]); err != nil {
		return f.ioResult(err, start, "receive")
	}
	return f.answered(f.buf[:n], id, start)
}

func (f *DNSFlow) answered(msg []byte, id uint16, start time.Time) Result {
	rtt := time.Since(start)
	o, reason := checkDNSAnswer(msg, id, &f.q.question)
	return Result{Outcome: o, Reason: reason, RTT: rtt}
}

// ioResult classifies a socket error: a timeout is loss, an unreachable
// or a reset is a refusal, a connection the server closed before
// answering an AnswerError, a closed flow or a failed send local.
func (f *DNSFlow) ioResult(err error, start time.Time, op string) Result {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return Result{Outcome: Lost}
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH) && op != "send", errors.Is(err, syscall.ENETUNREACH) && op != "send":
		return Result{Outcome: Refused, RTT: time.Since(start)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return Result{Outcome: AnswerError, Reason: ReasonMalformed, RTT: time.Since(start)}
	case errors.Is(err, net.ErrClosed), errors.Is(err, context.Canceled):
		return Result{Outcome: LocalError, Reason: "closed", Err: err}
	case op == "send" || op == "connect":
		return Result{Outcome: LocalError, Reason: sendReason(err), Err: err}
	}
	return Result{Outcome: LocalError, Reason: "receive", Err: err}
}

func dnsLocalError(err error) Result { return Result{Outcome: LocalError, Reason: "socket", Err: err} }
