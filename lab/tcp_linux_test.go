package lab_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
)

// echoServer accepts on addr inside ns and echoes; Peers lists the remote
// addresses it saw.
type echoServer struct {
	ln    net.Listener
	mu    sync.Mutex
	peers []netip.Addr
}

func listen(t *testing.T, ns string, addr netip.AddrPort) *echoServer {
	t.Helper()
	return listenWith(t, ns, net.ListenConfig{}, addr)
}

// listenWith listens with lc, whose Control can set socket options.
func listenWith(t *testing.T, ns string, lc net.ListenConfig, addr netip.AddrPort) *echoServer {
	t.Helper()
	s := &echoServer{}
	if err := lab.Do(ns, func() (err error) {
		s.ln, err = lc.Listen(context.Background(), tcpNet(addr.Addr()), addr.String())
		return err
	}); err != nil {
		t.Fatalf("listen %v in %s: %v", addr, ns, err)
	}
	t.Cleanup(func() { s.ln.Close() })
	go func() {
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.peers = append(s.peers, c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap())
			s.mu.Unlock()
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return s
}

func (s *echoServer) Peers() []netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]netip.Addr(nil), s.peers...)
}

// tcpNet is "tcp4" or "tcp6" for a's family: never both, so an address
// of one family is never dialled as the other.
func tcpNet(a netip.Addr) string {
	if a.Is6() {
		return "tcp6"
	}
	return "tcp4"
}

// dial connects from namespace ns, from local (port 0: any) to remote.
func dial(ns string, local netip.AddrPort, remote netip.AddrPort, timeout time.Duration) (*net.TCPConn, error) {
	return dialWith(ns, net.Dialer{Timeout: timeout}, local, remote)
}

// dialWith dials with d, whose Control can set socket options.
func dialWith(ns string, d net.Dialer, local netip.AddrPort, remote netip.AddrPort) (*net.TCPConn, error) {
	if local.IsValid() {
		d.LocalAddr = net.TCPAddrFromAddrPort(local)
	}
	var c net.Conn
	err := lab.Do(ns, func() (err error) {
		c, err = d.Dial(tcpNet(remote.Addr()), remote.String())
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// roundTrip writes msg and reads it back within timeout.
func roundTrip(c net.Conn, msg string, timeout time.Duration) error {
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return err
}

// abort closes with RST, leaving no TIME_WAIT, so the same 5-tuple can be
// used again at once.
func abort(c *net.TCPConn) {
	c.SetLinger(0)
	c.Close()
}
