package probe

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
)

// blackHoleProxy is a loopback TCP proxy that can black-hole flows the
// way a load balancer that lost its connection table does: the TCP
// connection stays up on both sides, but the bytes of a dead flow are
// read and dropped. Dead flows stay dead; Unfreeze only lets new flows
// live, as an LB that forgot a flow never remembers it.
type blackHoleProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	frozen bool // new flows are born dead
	closed bool
	flows  map[*proxyFlow]struct{}
}

type proxyFlow struct {
	client, server *net.TCPConn
	dead           atomic.Bool
	closed         atomic.Bool
}

func startProxy(t testing.TB, target netip.AddrPort) *blackHoleProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &blackHoleProxy{ln: ln, target: target.String(), flows: map[*proxyFlow]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *blackHoleProxy) addr() netip.AddrPort {
	return p.ln.Addr().(*net.TCPAddr).AddrPort()
}

func (p *blackHoleProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
			continue
		}
		f := &proxyFlow{client: c.(*net.TCPConn), server: s.(*net.TCPConn)}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		f.dead.Store(p.frozen)
		p.flows[f] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(f, f.client, f.server) })
		p.wg.Go(func() { p.pipe(f, f.server, f.client) })
	}
}

// pipe copies src to dst until either side closes, dropping the bytes of
// a dead flow. Each Read blocks; the loop ends when a conn is closed.
func (p *blackHoleProxy) pipe(f *proxyFlow, src, dst *net.TCPConn) {
	defer func() {
		f.closed.Store(true)
		f.client.Close()
		f.server.Close()
		p.mu.Lock()
		delete(p.flows, f)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !f.dead.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// freezeExisting black-holes the flows open now; new flows pass (seed 001).
func (p *blackHoleProxy) freezeExisting() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for f := range p.flows {
		f.dead.Store(true)
	}
}

// freeze black-holes open flows and every new one until unfreeze.
func (p *blackHoleProxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
	p.freezeExisting()
}

func (p *blackHoleProxy) unfreeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = false
}

// resetAll sends an RST to the client of every open flow and returns
// how many there were.
func (p *blackHoleProxy) resetAll() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for f := range p.flows {
		if f.closed.Swap(true) {
			continue
		}
		f.client.SetLinger(0)
		f.client.Close()
		f.server.Close()
		n++
	}
	return n
}

func (p *blackHoleProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.resetAll()
	p.wg.Wait()
}
