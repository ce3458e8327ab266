package probe

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
)

// ResetReason says why an HTTP/2 probe connection ended or could not be
// made. The strings are the reason label of
// prober_http2_connection_resets_total.
type ResetReason uint8

// The reset reasons.
const (
	ResetPingTimeout ResetReason = iota // DeadAfter PINGs in a row went unanswered
	ResetRefused                        // the dial was refused (RST to the SYN)
	ResetPeer                           // the peer ended the connection without GOAWAY (RST or FIN)
	ResetTLS                            // TLS handshake, verification or ALPN failed
	ResetGoAway                         // the server sent GOAWAY
	numResetReasons
)

var resetReasonNames = [numResetReasons]string{"ping_timeout", "refused", "reset", "tls", "goaway"}

func (r ResetReason) String() string {
	if r < numResetReasons {
		return resetReasonNames[r]
	}
	return "unknown"
}

// HTTP/2 pinger defaults and bounds. config fills probing.http2 from
// these (config/http2.go), so that --check and a start agree.
const (
	DefaultHTTP2Timeout    = time.Second
	DefaultHTTP2DeadAfter  = 3
	MaxHTTP2DeadAfter      = 100
	DefaultHTTP2MinBackoff = time.Second
	DefaultHTTP2MaxBackoff = 30 * time.Second
)

// HTTP2Config configures NewHTTP2Pinger. The zero value pings h2c with
// prior knowledge, one-second timeout, dead after 3 lost PINGs.
type HTTP2Config struct {
	TLS bool // TLS with ALPN h2; else h2c with prior knowledge
	// ServerName is checked against the certificate; default: the target
	// address, which must then be an IP SAN.
	ServerName string
	// CAFile holds the PEM CAs that verify the server; default: the system
	// pool. InsecureSkipVerify skips verification, only when configured.
	CAFile             string
	InsecureSkipVerify bool
	// Timeout bounds one PING's wait for its ACK, and separately one dial
	// with its TLS handshake. Default 1s.
	Timeout time.Duration
	// DeadAfter is how many PINGs in a row may go unanswered before the
	// connection is declared dead and redialled. Default 3.
	DeadAfter int
	// MinBackoff and MaxBackoff bound the wait between failed redials
	// (doubling, jittered). Defaults 1s and 30s. The first redial after a
	// connection is lost is never delayed.
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
}

// HTTP2Pinger keeps one long-lived HTTP/2 connection to a target and sends
// PINGs on it. A PING rides an established flow, so it sees what SYN and
// ICMP probes (new flows every time) cannot: a load balancer or conntrack
// table that silently forgot the connection (seeds 000 and 001).
//
// Ping is meant to be called once per probe interval by one goroutine;
// calls are serialized. The pinger starts no goroutine of its own; the
// connection's reader belongs to x/net/http2 and ends with it.
type HTTP2Pinger struct {
	addr     string
	cfg      HTTP2Config
	tlsConf  *tls.Config
	tr       *http2.Transport
	log      *slog.Logger
	done     context.Context // cancelled by Close
	stopDone context.CancelFunc

	resets [numResetReasons]atomic.Uint64
	// dialTCP dials p.addr; a net.Dialer's, replaced only by tests.
	dialTCP func(ctx context.Context, addr string) (net.Conn, error)

	mu       sync.Mutex
	closed   bool
	conn     *h2Conn
	lost     int       // PINGs in a row without ACK on conn
	failures int       // failed (re)connections in a row, for backoff
	nextDial time.Time // no dial before this
}

// h2Conn is one dialled connection.
type h2Conn struct {
	cc     *http2.ClientConn
	tcp    *net.TCPConn
	rec    *readRecorder
	proven bool // a PING on it was ACKed
}

// NewHTTP2Pinger checks cfg and loads the CA file. It dials nothing: the
// first Ping does.
func NewHTTP2Pinger(t Target, cfg HTTP2Config) (*HTTP2Pinger, error) {
	var errs []error
	if !t.Addr.IsValid() || t.Port == 0 {
		errs = append(errs, fmt.Errorf("target %s: need an address and a port", t.Addr))
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &HTTP2Pinger{
		addr: netip.AddrPortFrom(t.Addr, t.Port).String(),
		cfg:  cfg,
		log:  cfg.Logger.With("protocol", string(ProtocolHTTP2Ping), "peer", netip.AddrPortFrom(t.Addr, t.Port).String()),
		tr: &http2.Transport{
			// No ReadIdleTimeout: our PINGs are the health check, and the
			// library closing the connection itself would hide the count.
			// A write that blocks this long means the flow is dead anyway;
			// the bound keeps ClientConn.State (which takes the write lock)
			// from hanging behind it.
			WriteByteTimeout: cfg.Timeout * time.Duration(cfg.DeadAfter),
		},
	}
	if cfg.TLS {
		p.tlsConf = &tls.Config{
			ServerName:         cfg.ServerName,
			NextProtos:         []string{http2.NextProtoTLS},
			MinVersion:         tls.VersionTLS12,
			InsecureSkipVerify: cfg.InsecureSkipVerify,
		}
		if p.tlsConf.ServerName == "" {
			p.tlsConf.ServerName = t.Addr.WithZone("").String()
		}
		if cfg.CAFile != "" {
			pool, err := loadCAFile(cfg.CAFile)
			if err != nil {
				errs = append(errs, err)
			}
			p.tlsConf.RootCAs = pool
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("http2_ping %s: %w", p.addr, err)
	}
	p.done, p.stopDone = context.WithCancel(context.Background())
	return p, nil
}

// SetDefaults fills every zero field, and raises MaxBackoff to
// MinBackoff.
func (c *HTTP2Config) SetDefaults() {
	c.Timeout = cmp.Or(c.Timeout, DefaultHTTP2Timeout)
	c.DeadAfter = cmp.Or(c.DeadAfter, DefaultHTTP2DeadAfter)
	c.MinBackoff = cmp.Or(c.MinBackoff, DefaultHTTP2MinBackoff)
	c.MaxBackoff = max(cmp.Or(c.MaxBackoff, DefaultHTTP2MaxBackoff), c.MinBackoff)
}

// Check reports every field of a defaulted HTTP2Config that is out of
// range or contradicts another to bad, by field name: timeout,
// deadAfter, minBackoff, caFile, serverName,
// insecureSkipVerify. It is the one definition of the ranges:
// NewHTTP2Pinger runs it, and so does config's validation, which maps the
// names to its own fields. It reads no file.
func (c HTTP2Config) Check(bad func(field, format string, args ...any)) {
	if c.Timeout <= 0 {
		bad("timeout", "%s must be positive", c.Timeout)
	}
	if c.DeadAfter < 1 || c.DeadAfter > MaxHTTP2DeadAfter {
		bad("deadAfter", "%d not in 1..%d", c.DeadAfter, MaxHTTP2DeadAfter)
	}
	if c.MinBackoff <= 0 {
		bad("minBackoff", "%s must be positive", c.MinBackoff)
	}
	if !c.TLS {
		for _, set := range []struct {
			field string
			on    bool
		}{{"caFile", c.CAFile != ""}, {"serverName", c.ServerName != ""}, {"insecureSkipVerify", c.InsecureSkipVerify}} {
			if set.on {
				bad(set.field, "needs tls")
			}
		}
	} else if c.CAFile != "" && c.InsecureSkipVerify {
		bad("insecureSkipVerify", "contradicts caFile: set one")
	}
}

// Validate is Check with the problems joined.
func (c HTTP2Config) Validate() error { return joinChecks(c.Check) }

func loadCAFile(name string) (*x509.CertPool, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("caFile: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("caFile %s: no PEM certificate in it", name)
	}
	return pool, nil
}

// Resets counts the connection resets so far by reason (every reason,
// zeros included), for prober_http2_connection_resets_total. A reset is
// an established connection lost (ping_timeout, reset, goaway) or a dial
// the target turned down (refused, tls). A dial that times out is not a
// reset: it is a Lost probe, as a lost SYN is for tcp_syn.
func (p *HTTP2Pinger) Resets() map[string]uint64 {
	m := make(map[string]uint64, numResetReasons)
	for r := range numResetReasons {
		m[r.String()] = p.resets[r].Load()
	}
	return m
}

// Ping sends one PING on the connection, dialling it first if there is
// none. It returns within 2×Timeout (dial, then PING), 4×Timeout if a
// GOAWAY forces a second try:
//   - ACK: OK with the PING's round trip (the dial is not in it).
//   - no ACK within Timeout: Lost. After DeadAfter in a row, or the first
//     on a connection that never answered one, the connection is closed
//     as dead (reset ping_timeout); the next Ping redials at once.
//   - dial refused, or the connection reset under the PING: Refused with
//     Reason "refused" or "reset". A dial that times out: Lost.
//   - TLS failure: Refused, Reason "tls". The target did answer (the TCP
//     handshake completed, a certificate came back), so it is not loss,
//     and not a LocalError: our side worked. A wrong certificate is the
//     target's or the configuration's problem, and shows in the reset
//     counter; a handshake that times out is Lost.
//   - a GOAWAY seen before the PING: the connection is replaced first, so
//     a draining server costs no probe.
//   - during a backoff between failed redials: LocalError "backoff" (no
//     packet was sent); ctx cancelled or Close: LocalError "canceled".
func (p *HTTP2Pinger) Ping(ctx context.Context) Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Result{Outcome: LocalError, Reason: "canceled", Err: net.ErrClosed}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.done, cancel)()

	if c := p.conn; c != nil {
		if reason, err := c.ended(nil); err != nil {
			p.drop(reason, err)
		}
	}
	for try := 0; ; try++ {
		if p.conn == nil {
			if r, ok := p.connect(ctx); !ok {
				return r
			}
		}
		r, reason := p.ping(ctx)
		if reason != ResetGoAway || try > 0 {
			return r
		}
		// The server went away under the PING: replace the connection and
		// try once more, as if the GOAWAY had come before.
	}
}

// ended returns why c is unusable, or a nil error if it is not. pingErr
// is the error of a PING that just failed on it, or nil.
//
// ClientConn.CanTakeNewRequest alone cannot tell: it answers true for a
// closed connection that never carried a request (x/net/http2, so that a
// RoundTrip reports the error), which is every pinger connection. So the
// readRecorder says whether the connection is down, and State, which
// also takes the write lock, runs only once CanTakeNewRequest says no or
// the connection is down (then writes fail fast and the lock is free).
func (c *h2Conn) ended(pingErr error) (ResetReason, error) {
	readErr := c.rec.readErr()
	down := readErr != nil || c.rec.closed.Load() || pingErr != nil
	if !down && c.cc.CanTakeNewRequest() {
		return 0, nil
	}
	if c.cc.State().Closing { // we never Shutdown: the server sent GOAWAY
		return ResetGoAway, errors.New("server sent GOAWAY")
	}
	if !down {
		return 0, nil // e.g. the server allows 0 streams: PINGs still work
	}
	// The reader's error, if it has one, says more than the write's: a
	// write fails with "use of closed network connection" once the reader
	// has closed the connection after an RST.
	err := cmp.Or(readErr, pingErr, error(errConnClosed))
	return endReason(err), err
}

var errConnClosed = errors.New("http2 connection closed")

// endReason classifies the error that ended a connection we did not close.
func endReason(err error) ResetReason {
	switch {
	case errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, net.ErrClosed):
		// The kernel gave up retransmitting, or x/net closed the conn after
		// a write stalled for WriteByteTimeout: the flow stopped answering.
		return ResetPingTimeout
	default: // EOF, ECONNRESET, EPIPE, a protocol error
		return ResetPeer
	}
}

// drop closes the current connection and counts the reset.
func (p *HTTP2Pinger) drop(reason ResetReason, err error) {
	c := p.conn
	p.conn, p.lost = nil, 0
	if reason == ResetPingTimeout {
		// Our FIN would sit behind unacked PINGs, retransmitted into the
		// black hole for minutes (tcp_orphan_retries). Linger 0 frees the
		// socket now with an RST instead.
		_ = c.tcp.SetLinger(0)
	}
	_ = c.cc.Close()
	p.resets[reason].Add(1)
	p.log.Info("http2 connection reset", "reason", reason.String(), "proven", c.proven, "err", err)
}

// connect dials a new connection unless a backoff forbids it.
func (p *HTTP2Pinger) connect(ctx context.Context) (Result, bool) {
	if wait := time.Until(p.nextDial); wait > 0 {
		return Result{Outcome: LocalError, Reason: "backoff",
			Err: fmt.Errorf("http2_ping %s: redial in %v", p.addr, wait.Round(time.Millisecond))}, false
	}
	dctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	c, r, reason := p.dial(dctx)
	if c != nil {
		p.conn, p.lost = c, 0
		return Result{}, true
	}
	if ctx.Err() != nil {
		return canceled(ctx), false
	}
	// Back off only when somebody answered no (refused, a TLS or HTTP/2
	// failure) or our side failed: redialling those every interval would
	// cost the server a handshake each time, from every agent. A dial or
	// handshake that timed out cost nobody anything but one lost SYN or
	// ClientHello, like a tcp_syn probe; it is redialled on the next
	// interval, so the connection is back one interval after an outage,
	// however long the outage was.
	if r.Outcome != Lost {
		p.backoff()
	}
	if reason < numResetReasons {
		p.resets[reason].Add(1)
	}
	p.log.Debug("http2 dial failed", "outcome", r.Outcome.String(), "reason", r.Reason, "err", r.Err)
	return r, false
}

// noReset marks a failed dial that is not a reset (a timeout, a local error).
const noReset = numResetReasons

// dial makes the TCP connection (with TLS) and starts HTTP/2 on it.
func (p *HTTP2Pinger) dial(ctx context.Context) (*h2Conn, Result, ResetReason) {
	// Keep-alive off: the PINGs are what should find a dead flow, on our
	// schedule, not the kernel's. TCP_USER_TIMEOUT is left unset too: it
	// would need to exceed (DeadAfter-1)×interval+Timeout, which the
	// pinger does not know, and if it fired first it would turn the
	// black hole's lost PINGs into an immediate ETIMEDOUT error, masking
	// the very signal (see drop for how the dead socket is freed).
	dial := p.dialTCP
	if dial == nil {
		d := net.Dialer{KeepAlive: -1}
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	nc, err := dial(ctx, p.addr)
	if err != nil {
		r, reason := dialResult(p.addr, err)
		return nil, r, reason
	}
	tcp := nc.(*net.TCPConn)
	var conn net.Conn = tcp
	if p.tlsConf != nil {
		tc := tls.Client(tcp, p.tlsConf)
		err := tc.HandshakeContext(ctx)
		if err == nil && tc.ConnectionState().NegotiatedProtocol != http2.NextProtoTLS {
			err = fmt.Errorf("server negotiated %q, not h2", tc.ConnectionState().NegotiatedProtocol)
		}
		if err != nil {
			tcp.Close()
			if isTimeout(err) {
				return nil, Result{Outcome: Lost, Err: fmt.Errorf("http2_ping %s: tls handshake: %w", p.addr, err)}, noReset
			}
			return nil, Result{Outcome: Refused, Reason: ResetTLS.String(),
				Err: fmt.Errorf("http2_ping %s: tls: %w", p.addr, err)}, ResetTLS
		}
		conn = tc
	}
	rec := &readRecorder{Conn: conn}
	cc, err := p.tr.NewClientConn(rec)
	if err != nil { // writing the preface failed: the peer is gone already
		tcp.Close()
		return nil, Result{Outcome: Refused, Reason: ResetPeer.String(),
			Err: fmt.Errorf("http2_ping %s: http2 preface: %w", p.addr, err)}, ResetPeer
	}
	return &h2Conn{cc: cc, tcp: tcp, rec: rec}, Result{}, 0
}

func dialResult(addr string, err error) (Result, ResetReason) {
	err = fmt.Errorf("http2_ping %s: dial: %w", addr, err)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return Result{Outcome: Refused, Reason: ResetRefused.String(), Err: err}, ResetRefused
	case isTimeout(err), errors.Is(err, syscall.EHOSTUNREACH):
		// EHOSTUNREACH: ARP or a router found nobody at the address: no
		// answer from the target, as with a lost SYN.
		return Result{Outcome: Lost, Err: err}, noReset
	case errors.Is(err, syscall.ENETUNREACH):
		return Result{Outcome: LocalError, Reason: "no_route", Err: err}, noReset
	}
	return Result{Outcome: LocalError, Reason: "dial", Err: err}, noReset
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func canceled(ctx context.Context) Result {
	return Result{Outcome: LocalError, Reason: "canceled", Err: ctx.Err()}
}

// backoff records a failed (re)connection and delays the next dial. The
// first failure after a good connection waits MinBackoff at most, less
// than any sane probe interval, so the first redial is never delayed.
func (p *HTTP2Pinger) backoff() {
	p.failures++
	d := p.cfg.MinBackoff << min(p.failures-1, 20)
	if d <= 0 || d > p.cfg.MaxBackoff {
		d = p.cfg.MaxBackoff
	}
	// Jitter in [d/2, d]: agents that lost the same LB at once must not
	// come back to it in lockstep.
	d = d/2 + rand.N(d/2+1)
	p.nextDial = time.Now().Add(d)
}

// ping sends one PING on p.conn. The reason is ResetGoAway when the
// connection ended by GOAWAY under it, for Ping to retry.
func (p *HTTP2Pinger) ping(ctx context.Context) (Result, ResetReason) {
	c := p.conn
	pctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	start := time.Now()
	err := c.cc.Ping(pctx)
	rtt := time.Since(start)
	switch {
	case err == nil:
		c.proven, p.lost, p.failures, p.nextDial = true, 0, 0, time.Time{}
		return Result{Outcome: OK, RTT: rtt}, noReset
	case ctx.Err() != nil:
		return canceled(ctx), noReset
	case errors.Is(err, context.DeadlineExceeded):
		p.lost++
		lostErr := fmt.Errorf("http2_ping %s: no PING ACK within %v (%d in a row)", p.addr, p.cfg.Timeout, p.lost)
		if !c.proven {
			// A fresh connection that cannot carry one PING (a proxy that
			// accepts TCP but forwards nothing) is not given DeadAfter
			// intervals: that would delay recovery after the fault clears.
			p.backoff()
			p.drop(ResetPingTimeout, lostErr)
		} else if p.lost >= p.cfg.DeadAfter {
			p.drop(ResetPingTimeout, lostErr)
		}
		return Result{Outcome: Lost, Err: lostErr}, noReset
	}
	reason, endErr := c.ended(err)
	p.drop(reason, endErr)
	err = fmt.Errorf("http2_ping %s: connection ended: %w", p.addr, err)
	if reason == ResetPingTimeout {
		return Result{Outcome: Lost, Err: err}, reason
	}
	return Result{Outcome: Refused, Reason: reason.String(), Err: err}, reason
}

// Close closes the connection; a Ping in progress returns "canceled".
func (p *HTTP2Pinger) Close() error {
	p.stopDone()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.conn != nil {
		_ = p.conn.cc.Close()
		p.conn = nil
	}
	return nil
}

// readRecorder keeps the first read error of a connection, and whether
// x/net/http2 closed it: the library exposes neither, and the error tells
// an RST or FIN from a timeout.
type readRecorder struct {
	net.Conn
	first  atomic.Pointer[error]
	closed atomic.Bool
}

func (r *readRecorder) Close() error {
	r.closed.Store(true)
	return r.Conn.Close()
}

func (r *readRecorder) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	if err != nil {
		r.first.CompareAndSwap(nil, &err)
	}
	return n, err
}

func (r *readRecorder) readErr() error {
	if e := r.first.Load(); e != nil {
		return *e
	}
	return nil
}
