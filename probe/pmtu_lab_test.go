//go:build linux

package probe_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
	"github.com/netprober/prober/probe"
)

// TestProbeSizedOnTheLab: sized SYNs over real links, each family. With
// every uplink of n11's ToR passing 1,300 bytes and telling no one
// (mtu-blackhole), a 1,400-byte SYN is lost while a 1,280-byte one and
// a plain SYN are answered: a PMTU black hole. With the uplinks at MTU
// 1,300 and the routers sending "fragmentation needed" / "packet too
// big" (mtu), the 1,400-byte SYN is TooBig, path MTU 1,300: discovery
// works, no loss, and a 1,400-byte trace ends at the router that says
// so. (1,300: IPv6's links carry 1,280 at least.)
func TestProbeSizedOnTheLab(t *testing.T) {
	f := labtest.Up(t, lab.Spec{Spines: 3, Racks: 2, NodesPerRack: 1, PodsPerNode: -1, IPv6: true})
	src, _ := f.Host("n11")
	dst, _ := f.Host("n21")
	for _, fam := range []struct {
		name     string
		src, dst netip.Addr
	}{{"ipv4", src.Addr, dst.Addr}, {"ipv6", src.Addr6, dst.Addr6}} {
		t.Run(fam.name, func(t *testing.T) {
			var ln net.Listener
			if err := lab.Do(dst.Namespace, func() (err error) {
				ln, err = net.Listen("tcp", netip.AddrPortFrom(fam.dst, traceLabPort).String())
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			target := probe.Target{Addr: fam.dst, Port: traceLabPort}
			var e *probe.TCPSYN
			if err := lab.Do(src.Namespace, func() (err error) {
				e, err = probe.NewTCPSYN(probe.TCPSYNConfig{Source: fam.src, PortBase: 62100, Ports: 4, Sized: true})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			ports, err := e.AllocPorts(4)
			if err != nil {
				t.Fatal(err)
			}
			// expect probes every flow at size (0: a plain SYN) and
			// wants each to end in want.
			expect := func(phase string, size int, want probe.Outcome, mtu int) {
				t.Helper()
				for _, sport := range ports {
					r := e.ProbeSized(ctx, target, sport, time.Second, size)
					if r.Outcome != want || want == probe.TooBig && r.MTU != mtu {
						t.Errorf("%s: %d-byte SYN from port %d: %s (mtu %d, %v), want %s (mtu %d)", phase, size, sport, r.Outcome, r.MTU, r.Err, want, mtu)
					}
				}
			}
			expect("healthy", 1500, probe.OK, 0)
			spines := []string{"spine1", "spine2", "spine3"}
			for _, s := range spines {
				if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultMTUBlackhole, From: "tor1", To: s, MTU: 1300}); err != nil {
					t.Fatal(err)
				}
			}
			expect("black hole", 1400, probe.Lost, 0)
			expect("black hole", 1280, probe.OK, 0)
			expect("black hole", 0, probe.OK, 0)
			if err := f.Clear(ctx); err != nil {
				t.Fatal(err)
			}
			for _, s := range spines {
				if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultMTU, From: "tor1", To: s, MTU: 1300}); err != nil {
					t.Fatal(err)
				}
			}
			expect("signalled", 1400, probe.TooBig, 1300)
			expect("signalled", 1280, probe.OK, 0)
			// A 1,400-byte trace ends where the router says too big:
			// an Unreachable from tor1, on IPv6 a Packet Too Big.
			var tr *probe.Tracer
			if err := lab.Do(src.Namespace, func() (err error) {
				tr, err = probe.NewTracer(e, nil)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			trDone := make(chan error, 1)
			go func() { trDone <- tr.Run(ctx) }()
			fts, err := tr.Trace(ctx, target, ports, probe.TraceConfig{Probes: 2, MaxTTL: 6, Size: 1400})
			tr.Close()
			if rerr := <-trDone; rerr != nil {
				t.Errorf("tracer Run: %v", rerr)
			}
			if err != nil {
				t.Fatal(err)
			}
			hops := f.Hops()
			for _, ft := range fts {
				var last probe.Hop
				for _, h := range ft.Hops {
					if h.Addr.IsValid() {
						last = h
					}
				}
				if ft.Reached || !last.Unreachable || hops[last.Addr.String()] != "tor1" {
					t.Errorf("signalled: 1,400-byte trace of port %d: reached %v, hops %+v; want it to end at tor1, unreachable", ft.SourcePort, ft.Reached, ft.Hops)
				}
			}
			if err := f.Clear(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
