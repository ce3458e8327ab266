package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// ICMP sends echo requests over one socket and matches replies by
// identifier and sequence number.
//
// It prefers an unprivileged datagram socket (allowed when the process's
// group is in net.ipv4.ping_group_range); the kernel then owns the
// identifier and routes only our replies to us. Otherwise it falls back to
// a raw socket, which needs CAP_NET_RAW and sees every echo reply of the
// host: the identifier is random per process (as blackbox_exporter does,
// so restarted or parallel agents don't collide) and payloads carry a magic
// marker.
//
// An engine is ICMP or ICMPv6 by its source address. The same sysctl
// governs both families' datagram sockets; a raw ICMPv6 socket is also
// handed neighbour discovery and every other ICMPv6 message, so it is
// given an ICMP6_FILTER (RFC 3542 §3.2) that passes only echo replies.
type ICMP struct {
	src        netip.Addr
	ipv6       bool
	conn       *icmp.PacketConn
	privileged bool
	id         uint16
	log        *slog.Logger

	mu      sync.Mutex
	seq     uint16
	pending map[uint16]*icmpWait
	Unmatched
}

type icmpWait struct {
	dst      netip.Addr
	sentAt   time.Time
	answered bool
	ch       chan time.Time
}

// NewICMP opens the echo socket on src, an IPv4 or IPv6 address.
func NewICMP(src netip.Addr, logger *slog.Logger) (*ICMP, error) {
	if !familyOK(src) {
		return nil, fmt.Errorf("icmp: source %s is not an IPv4 or IPv6 address (without zone)", src)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := &ICMP{src: src, ipv6: !src.Is4(), log: logger, pending: map[uint16]*icmpWait{}, seq: uint16(rand.Uint32())}
	dgram, raw := "udp4", "ip4:icmp"
	if e.ipv6 {
		dgram, raw = "udp6", "ip6:ipv6-icmp"
	}
	conn, err := icmp.ListenPacket(dgram, src.String())
	if err == nil {
		e.conn = conn
		e.id = uint16(conn.LocalAddr().(*net.UDPAddr).Port)
		return e, nil
	}
	if !errors.Is(err, syscall.EACCES) && !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EPROTONOSUPPORT) {
		return nil, fmt.Errorf("icmp listen %s: %w", src, err)
	}
	conn, rerr := icmp.ListenPacket(raw, src.String())
	if rerr != nil {
		return nil, fmt.Errorf("icmp probe needs CAP_NET_RAW or its group in net.ipv4.ping_group_range (datagram socket: %v): %w", err, privilegeError("icmp", rerr))
	}
	if e.ipv6 {
		var f ipv6.ICMPFilter
		f.SetAll(true)
		f.Accept(ipv6.ICMPTypeEchoReply)
		if ferr := conn.IPv6PacketConn().SetICMPFilter(&f); ferr != nil {
			conn.Close()
			return nil, fmt.Errorf("icmp filter on %s: %w", src, ferr)
		}
	}
	e.conn, e.privileged, e.id = conn, true, uint16(rand.Uint32())
	return e, nil
}

// Privileged reports whether the engine fell back to a raw socket.
func (e *ICMP) Privileged() bool { return e.privileged }

// Probe sends one echo request to t and waits up to timeout for the reply.
func (e *ICMP) Probe(ctx context.Context, t Target, timeout time.Duration) Result {
	if !sameFamily(e.src, t.Addr) {
		return Result{Outcome: LocalError, Reason: "config", Err: errOtherFamily("icmp", e.src, t.Addr)}
	}
	w := &icmpWait{dst: t.Addr, ch: make(chan time.Time, 1)}
	e.mu.Lock()
	e.seq++
	seq := e.seq
	if _, busy := e.pending[seq]; busy {
		e.mu.Unlock()
		return Result{Outcome: LocalError, Reason: "busy", Err: errors.New("icmp: 65536 probes in flight")}
	}
	e.pending[seq] = w
	w.sentAt = time.Now()
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.pending, seq)
		e.mu.Unlock()
	}()

	var buf [icmpHeaderLen + icmpPayloadLen]byte
	msg := encodeEcho(buf[:], e.ipv6, e.id, seq)
	var dst net.Addr = &net.UDPAddr{IP: t.Addr.AsSlice()}
	if e.privileged {
		dst = &net.IPAddr{IP: t.Addr.AsSlice()}
	}
	if _, err := e.conn.WriteTo(msg, dst); err != nil {
		return Result{Outcome: LocalError, Reason: sendReason(err), Err: fmt.Errorf("icmp send to %s: %w", t.Addr, err)}
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case at := <-w.ch:
		return Result{Outcome: OK, RTT: at.Sub(w.sentAt)}
	case <-timer.C:
		return Result{Outcome: Lost}
	case <-ctx.Done():
		return Result{Outcome: LocalError, Reason: "canceled", Err: ctx.Err()}
	}
}

// Run reads replies until ctx is cancelled or the engine is closed.
func (e *ICMP) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, e.Close)
	defer stop()
	buf := make([]byte, 1500)
	for {
		n, from, err := e.conn.ReadFrom(buf)
		at := time.Now()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			e.RecvErrors.Add(1)
			e.log.Warn("icmp receive", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		e.deliver(buf[:n], addrOf(from), at)
	}
}

func (e *ICMP) deliver(msg []byte, from netip.Addr, at time.Time) {
	r, ok := decodeEcho(msg, e.ipv6)
	if !ok {
		if _, reply := echoTypes(e.ipv6); e.privileged && len(msg) > 0 && msg[0] != reply {
			return // a raw socket sees every ICMP message: not ours to count
		}
		e.Malformed.Add(1)
		return
	}
	if r.id != e.id {
		e.Foreign.Add(1)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.pending[r.seq]
	switch {
	case w == nil:
		e.Late.Add(1)
	case w.dst != from:
		e.Foreign.Add(1)
	case w.answered:
		e.Duplicate.Add(1)
	default:
		w.answered = true
		w.ch <- at
	}
}

// Close closes the socket; Run returns.
func (e *ICMP) Close() { e.conn.Close() }

func addrOf(a net.Addr) netip.Addr {
	var ip net.IP
	switch a := a.(type) {
	case *net.UDPAddr:
		ip = a.IP
	case *net.IPAddr:
		ip = a.IP
	}
	addr, _ := netip.AddrFromSlice(ip)
	return addr.Unmap()
}
