package lab_test

import (
	"bytes"
	"context"
	"net/netip"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
	"github.com/vishvananda/netns"
)

// TestDelay delays the one spine of the smallest fabric with a spine
// path (2 racks of 1 node, no pods, no LB), which every packet between
// the racks crosses, twice per round trip: the median TCP echo round trip
// rises by twice the delay while it holds, and is back when it ends, by
// Clear, by its table deleted behind its back, or by Hold's ctx.
func TestDelay(t *testing.T) {
	f := labtest.Up(t, lab.Spec{Spines: 1, Racks: 2, NodesPerRack: 1, PodsPerNode: -1})
	ctx := t.Context()
	n11, _ := f.Host("n11")
	n21, _ := f.Host("n21")
	to := netip.AddrPortFrom(n21.Addr, 7100)
	listen(t, n21.Namespace, to)
	const millis = 30
	delay := lab.Fault{Kind: lab.FaultDelay, Device: "spine1", Millis: millis}

	rtt := func(t *testing.T) time.Duration { return medianRTT(t, n11.Namespace, to) }
	// delayed checks that the median round trip rose by about two delays
	// (one each way): at least that, as the delay is a minimum, and not
	// far more on a loaded machine.
	delayed := func(t *testing.T, base time.Duration) {
		t.Helper()
		got := rtt(t)
		t.Logf("median round trip %v delayed, %v before", got, base)
		if rise := got - base; rise < 2*millis*time.Millisecond-5*time.Millisecond || rise > 200*time.Millisecond {
			t.Errorf("round trip rose by %v with %d ms each way, want %d..200 ms", rise, millis, 2*millis-5)
		}
	}
	undelayed := func(t *testing.T) {
		t.Helper()
		if got := rtt(t); got > 10*time.Millisecond {
			t.Errorf("median round trip %v after the delay ended, want under 10ms", got)
		}
		if stacks := holders(); stacks != "" {
			t.Errorf("a delay goroutine still runs:\n%s", stacks)
		}
	}
	inject := func(t *testing.T) {
		t.Helper()
		if err := f.Inject(ctx, delay); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Clear(context.Background()) })
	}

	base := rtt(t)
	t.Logf("median round trip %v undelayed", base)

	t.Run("clear ends it", func(t *testing.T) {
		inject(t)
		delayed(t, base)
		if err := f.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		undelayed(t)
	})

	t.Run("ends when its table is deleted behind its back", func(t *testing.T) {
		inject(t)
		delayed(t, base)
		deleteFaultTable(t, f.Spec.Prefix+"-spine1")
		hold, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		if err := f.Hold(hold); err != nil || hold.Err() != nil {
			t.Fatalf("Hold = %v after %v, ctx %v: want it to end by itself within a poll", err, time.Since(start), hold.Err())
		}
		t.Logf("the delay ended %v after its table went", time.Since(start).Round(time.Millisecond))
		undelayed(t)
	})

	t.Run("hold's end removes its rules", func(t *testing.T) {
		inject(t)
		hold, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := f.Hold(hold); err != nil {
			t.Fatalf("Hold: %v", err)
		}
		// Without its reader the rule would pass packets (bypass): only
		// the chain's absence shows the rule went.
		if chains := faultChains(t, f.Spec.Prefix+"-spine1"); len(chains) > 0 {
			t.Errorf("prober_fault still has chains %v after Hold ended", chains)
		}
		undelayed(t)
		if err := f.Hold(ctx); err != nil {
			t.Errorf("Hold with no delay: %v", err)
		}
	})

	t.Run("two delays on one device add up", func(t *testing.T) {
		inject(t)
		inject(t)
		got := rtt(t)
		t.Logf("median round trip %v with two delays", got)
		if rise := got - base; rise < 4*millis*time.Millisecond-5*time.Millisecond || rise > 300*time.Millisecond {
			t.Errorf("round trip rose by %v with two delays of %d ms each way, want %d..300 ms", rise, millis, 4*millis-5)
		}
		if err := f.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		undelayed(t)
	})
}

// medianRTT is the median of 9 TCP echo round trips from namespace ns to
// an echo server (listen) at to, on one connection.
func medianRTT(t *testing.T, ns string, to netip.AddrPort) time.Duration {
	t.Helper()
	c, err := dial(ns, netip.AddrPort{}, to, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %v: %v", to, err)
	}
	defer abort(c)
	var rtts []time.Duration
	for range 9 {
		start := time.Now()
		if err := roundTrip(c, "x", 2*time.Second); err != nil {
			t.Fatalf("round trip to %v: %v", to, err)
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2]
}

// holders returns the stacks of the goroutines that hold a delay's
// packets, "" when none.
func holders() string {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	var out []string
	for stack := range strings.SplitSeq(b.String(), "\n\n") {
		if strings.Contains(stack, "lab.(*delayer)") {
			out = append(out, stack)
		}
	}
	return strings.Join(out, "\n\n")
}

// faultChains lists the chains of table inet prober_fault in namespace ns.
func faultChains(t *testing.T, ns string) []string {
	t.Helper()
	var names []string
	nftNS(t, ns, func(c *nftables.Conn) {
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
		if err != nil {
			t.Fatalf("list chains in %s: %v", ns, err)
		}
		for _, ch := range chains {
			if ch.Table.Name == "prober_fault" {
				names = append(names, ch.Name)
			}
		}
	})
	return names
}

// deleteFaultTable deletes table inet prober_fault in namespace ns as
// another process's `prober lab clear` does, without the Fabric knowing.
func deleteFaultTable(t *testing.T, ns string) {
	t.Helper()
	nftNS(t, ns, func(c *nftables.Conn) {
		c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "prober_fault"})
		if err := c.Flush(); err != nil {
			t.Fatalf("delete prober_fault in %s: %v", ns, err)
		}
	})
}

// nftNS calls fn with an nftables connection to namespace ns.
func nftNS(t *testing.T, ns string, fn func(c *nftables.Conn)) {
	t.Helper()
	fd, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(fd)))
	if err != nil {
		t.Fatal(err)
	}
	fn(c)
}
