package lab_test

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// ping sends count ICMP echoes to every target from namespace ns, one
// round every gap, waits up to wait for the last replies, and returns how
// many distinct replies came back from each target. It uses an
// unprivileged ping socket, which the lab allows in host namespaces.
func ping(t *testing.T, ns string, targets []netip.Addr, count int, gap, wait time.Duration) map[netip.Addr]int {
	t.Helper()
	for _, a := range targets {
		if !lab.LabRange.Contains(a) {
			t.Fatalf("refusing to ping %v: outside %v", a, lab.LabRange)
		}
	}
	var conn *icmp.PacketConn
	if err := lab.Do(ns, func() (err error) {
		conn, err = icmp.ListenPacket("udp4", "0.0.0.0")
		return err
	}); err != nil {
		t.Fatalf("ping socket in %s: %v", ns, err)
	}
	defer conn.Close()

	type key struct {
		from netip.Addr
		seq  int
	}
	seen := map[key]bool{}
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			m, err := icmp.ParseMessage(1, buf[:n])
			if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
				continue
			}
			echo, ok := m.Body.(*icmp.Echo)
			if !ok {
				continue
			}
			a, _ := netip.AddrFromSlice(from.(*net.UDPAddr).IP)
			mu.Lock()
			seen[key{a.Unmap(), echo.Seq}] = true
			mu.Unlock()
		}
	}()
	for i := range count {
		for _, a := range targets {
			msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 1, Seq: i, Data: []byte("prober-lab")}}
			b, err := msg.Marshal(nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.WriteTo(b, &net.UDPAddr{IP: a.AsSlice()}); err != nil {
				t.Fatalf("ping %v from %s: %v", a, ns, err)
			}
		}
		time.Sleep(gap)
	}
	conn.SetReadDeadline(time.Now().Add(wait))
	<-done
	got := map[netip.Addr]int{}
	for k := range seen {
		got[k.from]++
	}
	return got
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// hop sends one UDP probe from host from to host to with source port
// sport and the given TTL, and returns who answered with ICMP Time
// Exceeded (the zero Addr if nobody did within 500 ms).
func hop(t *testing.T, from, to lab.Host, sport uint16, ttl int) netip.Addr {
	t.Helper()
	var raw *icmp.PacketConn
	var udp *net.UDPConn
	err := lab.Do(from.Namespace, func() (err error) {
		if raw, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0"); err != nil {
			return err
		}
		udp, err = net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from.Addr, sport)),
			net.UDPAddrFromAddrPort(netip.AddrPortFrom(to.Addr, 33434)))
		return err
	})
	if err != nil {
		t.Fatalf("probe sockets in %s: %v", from.Name, err)
	}
	defer raw.Close()
	defer udp.Close()
	if err := ipv4.NewConn(udp).SetTTL(ttl); err != nil {
		t.Fatal(err)
	}
	if _, err := udp.Write([]byte("prober-lab")); err != nil {
		t.Fatal(err)
	}
	raw.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	buf := make([]byte, 1500)
	for {
		n, peer, err := raw.ReadFrom(buf)
		if err != nil {
			return netip.Addr{}
		}
		m, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || m.Type != ipv4.ICMPTypeTimeExceeded {
			continue
		}
		// The quoted datagram: inner IPv4 header, then the UDP header.
		inner := m.Body.(*icmp.TimeExceeded).Data
		if len(inner) < 20 {
			continue
		}
		ihl := int(inner[0]&0x0f) * 4
		if len(inner) < ihl+2 || uint16(inner[ihl])<<8|uint16(inner[ihl+1]) != sport {
			continue
		}
		a, _ := netip.AddrFromSlice(peer.(*net.IPAddr).IP)
		return a.Unmap()
	}
}
