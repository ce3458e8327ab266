package lab_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
)

func TestFabric(t *testing.T) {
	f := labtest.Up(t, lab.DefaultSpec())

	t.Run("reachability", func(t *testing.T) {
		var targets []netip.Addr
		for _, h := range f.Hosts {
			targets = append(targets, h.Addr)
		}
		for _, n := range f.Nodes() {
			got := ping(t, n.Namespace, targets, 2, 20*time.Millisecond, 500*time.Millisecond)
			for _, h := range f.Hosts {
				if got[h.Addr] == 0 {
					t.Errorf("%s -> %s (%v): no echo reply", n.Name, h.Name, h.Addr)
				}
			}
		}
	})
}
