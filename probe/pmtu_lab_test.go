//go:build linux

package probe_test

import (
	"context"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/probe"
)

// TestProbeSizedOnTheLab: sized SYNs over real links. Healthy, a
// 1,500-byte SYN is answered. With every uplink of n11's ToR passing
// 1,200 bytes and telling no one (mtu-blackhole), a 1,400-byte SYN is
// lost while a 1,200-byte one and a plain SYN are answered: a PMTU black
// hole. With the uplinks at MTU 1,200 and the routers sending
// "fragmentation needed" (mtu), the 1,400-byte SYN is TooBig, path MTU
// 1,200: discovery works, no loss.
func TestProbeSizedOnTheLab(t *testing.T) {
	l := upTraceLab(t)
	var e *probe.TCPSYN
	if err := lab.Do(l.src.Namespace, func() (err error) {
		e, err = probe.NewTCPSYN(probe.TCPSYNConfig{Source: l.src.Addr, PortBase: 62100, Ports: 4})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	ports, err := e.AllocPorts(4)
	if err != nil {
		t.Fatal(err)
	}
	// expect probes every flow at size (0: a plain SYN) and wants each
	// to end in want.
	expect := func(phase string, size int, want probe.Outcome, mtu int) {
		t.Helper()
		for _, sport := range ports {
			r := e.ProbeSized(ctx, l.target, sport, time.Second, size)
			if r.Outcome != want || want == probe.TooBig && r.MTU != mtu {
				t.Errorf("%s: %d-byte SYN from port %d: %s (mtu %d, %v), want %s (mtu %d)", phase, size, sport, r.Outcome, r.MTU, r.Err, want, mtu)
			}
		}
	}
	expect("healthy", 1500, probe.OK, 0)
	spines := []string{"spine1", "spine2", "spine3"}
	for _, s := range spines {
		if err := l.f.Inject(ctx, lab.Fault{Kind: lab.FaultMTUBlackhole, From: "tor1", To: s, MTU: 1200}); err != nil {
			t.Fatal(err)
		}
	}
	expect("black hole", 1400, probe.Lost, 0)
	expect("black hole", 1200, probe.OK, 0)
	expect("black hole", 0, probe.OK, 0)
	if err := l.f.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range spines {
		if err := l.f.Inject(ctx, lab.Fault{Kind: lab.FaultMTU, From: "tor1", To: s, MTU: 1200}); err != nil {
			t.Fatal(err)
		}
	}
	expect("signalled", 1400, probe.TooBig, 1200)
	expect("signalled", 1200, probe.OK, 0)
}
