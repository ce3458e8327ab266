package lab_test

import (
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/netprober/prober/lab"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
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
	s := &echoServer{}
	if err := lab.Do(ns, func() (err error) {
		s.ln, err = net.Listen("tcp4", addr.String())
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

// dial connects from namespace ns, from local (port 0: any) to remote.
func dial(ns string, local netip.AddrPort, remote netip.AddrPort, timeout time.Duration) (*net.TCPConn, error) {
	var c net.Conn
	err := lab.Do(ns, func() (err error) {
		d := net.Dialer{Timeout: timeout, LocalAddr: net.TCPAddrFromAddrPort(local)}
		c, err = d.Dial("tcp4", remote.String())
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

// counters installs, in namespace ns, a forward chain with one counting
// rule per TCP source port, and returns a function that reads them.
func counters(t *testing.T, ns string, sports []uint16) func() map[uint16]uint64 {
	t.Helper()
	fd, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fd.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(fd)))
	if err != nil {
		t.Fatal(err)
	}
	tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "labtest"})
	ch := c.AddChain(&nftables.Chain{Table: tbl, Name: "count", Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
	for _, p := range sports {
		c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(p)},
			&expr.Counter{},
		}})
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("counters in %s: %v", ns, err)
	}
	return func() map[uint16]uint64 {
		rules, err := c.GetRules(tbl, ch)
		if err != nil {
			t.Fatalf("read counters in %s: %v", ns, err)
		}
		got := map[uint16]uint64{}
		for i, r := range rules {
			for _, e := range r.Exprs {
				if ctr, ok := e.(*expr.Counter); ok {
					got[sports[i]] = ctr.Packets
				}
			}
		}
		return got
	}
}
