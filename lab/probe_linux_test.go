package lab_test

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// icmpFamily is what a test needs to speak ICMP or ICMPv6.
type icmpFamily struct {
	ping, raw, any      string // networks and wildcard address for icmp.ListenPacket
	udp                 string
	proto               int // for icmp.ParseMessage
	echo, reply, expiry icmp.Type
	innerLen            func(inner []byte) int // the quoted IP header's length
}

var icmp4 = icmpFamily{
	ping: "udp4", raw: "ip4:icmp", any: "0.0.0.0", udp: "udp4", proto: 1,
	echo: ipv4.ICMPTypeEcho, reply: ipv4.ICMPTypeEchoReply, expiry: ipv4.ICMPTypeTimeExceeded,
	innerLen: func(inner []byte) int { return int(inner[0]&0x0f) * 4 },
}

var icmp6 = icmpFamily{
	ping: "udp6", raw: "ip6:ipv6-icmp", any: "::", udp: "udp6", proto: 58,
	echo: ipv6.ICMPTypeEchoRequest, reply: ipv6.ICMPTypeEchoReply, expiry: ipv6.ICMPTypeTimeExceeded,
	innerLen: func([]byte) int { return 40 }, // no extension headers in the lab
}

func icmpOf(a netip.Addr) icmpFamily {
	if a.Is6() {
		return icmp6
	}
	return icmp4
}

// ping sends count ICMP (or ICMPv6) echoes to every target from namespace
// ns, one round every gap, waits up to wait for the last replies, and
// returns how many distinct replies came back from each target. It uses
// unprivileged ping sockets, which the lab allows in host namespaces, one
// per family, side by side.
func ping(t *testing.T, ns string, targets []netip.Addr, count int, gap, wait time.Duration) map[netip.Addr]int {
	t.Helper()
	return pingSized(t, ns, targets, 0, count, gap, wait)
}

// pingSized is ping with echoes of size bytes on the wire (IP header
// included), the kernel's default path MTU discovery setting DF; 0 for
// small ones.
func pingSized(t *testing.T, ns string, targets []netip.Addr, size, count int, gap, wait time.Duration) map[netip.Addr]int {
	t.Helper()
	byFamily := map[bool][]netip.Addr{}
	for _, a := range targets {
		if !lab.LabRange.Contains(a) && !lab.LabRange6.Contains(a) {
			t.Fatalf("refusing to ping %v: outside %v and %v", a, lab.LabRange, lab.LabRange6)
		}
		byFamily[a.Is6()] = append(byFamily[a.Is6()], a)
	}
	got := map[netip.Addr]int{}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, family := range byFamily {
		wg.Go(func() {
			data := []byte("prober-lab")
			if hdr := 20 + 8; family[0].Is6() && size > 0 {
				data = make([]byte, max(size-40-8, len(data)))
			} else if size > 0 {
				data = make([]byte, max(size-hdr, len(data)))
			}
			replies, err := pingFamily(ns, icmpOf(family[0]), family, data, count, gap, wait)
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
			maps.Copy(got, replies)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return got
}

func pingFamily(ns string, fam icmpFamily, targets []netip.Addr, data []byte, count int, gap, wait time.Duration) (map[netip.Addr]int, error) {
	var conn *icmp.PacketConn
	if err := lab.Do(ns, func() (err error) {
		conn, err = icmp.ListenPacket(fam.ping, fam.any)
		return err
	}); err != nil {
		return nil, fmt.Errorf("ping socket in %s: %w", ns, err)
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
		buf := make([]byte, 9000)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			m, err := icmp.ParseMessage(fam.proto, buf[:n])
			if err != nil || m.Type != fam.reply {
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
	var err error
	for i := 0; i < count && err == nil; i++ {
		for _, a := range targets {
			msg := icmp.Message{Type: fam.echo, Body: &icmp.Echo{ID: 1, Seq: i, Data: data}}
			b, _ := msg.Marshal(nil) // the kernel sums a ping socket's ICMPv6
			if _, werr := conn.WriteTo(b, &net.UDPAddr{IP: a.AsSlice()}); werr != nil {
				err = fmt.Errorf("ping %v from %s: %w", a, ns, werr)
				break
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
	return got, err
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// hop sends one UDP probe from host from to host to with source port
// sport and the given TTL (hop limit), over IPv4 or, with v6, IPv6, and
// returns who answered with ICMP Time Exceeded (the zero Addr if nobody
// did within 500 ms).
func hop(t *testing.T, from, to lab.Host, sport uint16, ttl int, v6 bool) netip.Addr {
	t.Helper()
	src, dst, fam := from.Addr, to.Addr, icmp4
	if v6 {
		src, dst, fam = from.Addr6, to.Addr6, icmp6
	}
	var raw *icmp.PacketConn
	var udp *net.UDPConn
	err := lab.Do(from.Namespace, func() (err error) {
		if raw, err = icmp.ListenPacket(fam.raw, fam.any); err != nil {
			return err
		}
		// A fixed flow label (0), as a traceroute needs: the routers hash
		// it, and each probe's socket would draw its own.
		d := net.Dialer{LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, sport)), Control: labtest.NoAutoFlowLabel}
		c, err := d.Dial(fam.udp, netip.AddrPortFrom(dst, 33434).String())
		if err == nil {
			udp = c.(*net.UDPConn)
		}
		return err
	})
	if err != nil {
		t.Fatalf("probe sockets in %s: %v", from.Name, err)
	}
	defer raw.Close()
	defer udp.Close()
	if v6 {
		err = ipv6.NewConn(udp).SetHopLimit(ttl)
	} else {
		err = ipv4.NewConn(udp).SetTTL(ttl)
	}
	if err != nil {
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
		m, err := icmp.ParseMessage(fam.proto, buf[:n])
		if err != nil || m.Type != fam.expiry {
			continue
		}
		// The quoted datagram: inner IP header, then the UDP header.
		inner := m.Body.(*icmp.TimeExceeded).Data
		if len(inner) < 20 {
			continue
		}
		ihl := fam.innerLen(inner)
		if len(inner) < ihl+2 || uint16(inner[ihl])<<8|uint16(inner[ihl+1]) != sport {
			continue
		}
		a, _ := netip.AddrFromSlice(peer.(*net.IPAddr).IP)
		return a.Unmap()
	}
}
