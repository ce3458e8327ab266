package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/testbed"
)

// drawnSeed is the lab shape TestScenarios/drawn builds in make test
// (three tiers, pods on a VXLAN overlay, silent routers, nodes dropping
// echo: kinds no other run combines); PROBER_LAB_SEED draws another
// (docs/performance.md has the seeds run).
const drawnSeed = 4

// drawnShape is a lab fabric nobody chose and three faults placed in it
// at random: the lab's part of issue 28's drawn evaluation, which
// matrix's TestListQualityRandom runs on the simulator. Each network
// kind is drawn independently of the others, within what one suite of a
// CI run carries (at most 12 nodes).
type drawnShape struct {
	su        suite
	spec      lab.Spec // the shape's fields only
	scenarios []scenario
}

// pods reports whether the shape has a pod per node.
func (d drawnShape) pods() bool { return d.spec.PodsPerNode > 0 }

// drawShape draws from seed: 2 to 4 spines (or, one time in three, a
// three-tier Clos: 2 super-spines over 2 fabric pods of 2 racks, 2 or 3
// aggregation switches each), 2 to 4 racks (3 or 4 on silent routers)
// of 2 or 3 nodes, a pod per node or none, pods on a VXLAN overlay or
// routed, routers silent or answering, nodes dropping echo or not,
// agents on IPv4, IPv6 or both. The faults: an upper-tier switch at 5 %,
// one direction of a ToR's uplink at 5 %, a node's NIC at 10 %; each
// must be named alone, or tied with what the data cannot tell it from
// (on silent routers: its tier or its rack's uplinks,
// docs/localization.md).
func drawShape(seed uint64) drawnShape {
	rng := rand.New(rand.NewPCG(seed, 28))
	var d drawnShape
	s := &d.spec
	s.Spines, s.Racks, s.NodesPerRack = 2+rng.IntN(3), 2+rng.IntN(3), 2+rng.IntN(2)
	if rng.IntN(3) == 0 {
		s.SuperSpines, s.RacksPerPod, s.Racks, s.Spines, s.NodesPerRack = 2, 2, 4, 2+rng.IntN(2), 2
	}
	s.PodsPerNode = -1
	if rng.IntN(2) == 0 {
		s.PodsPerNode = 1
		s.Overlay = rng.IntN(2) == 0
	}
	s.SilentRouters, s.DropEcho = rng.IntN(3) == 0, rng.IntN(3) == 0
	if s.SilentRouters {
		// On silent routers only which rack pairs lose shows: between
		// two racks every pair is the same one, and a spine, either
		// ToR's uplinks and the tier read alike.
		s.Racks = max(s.Racks, 3)
	}
	switch rng.IntN(3) {
	case 0:
		d.su.families = []string{api.FamilyIPv4}
	case 1:
		d.su.ipv6, d.su.families = true, []string{api.FamilyIPv6}
	default:
		d.su.ipv6 = true // every family the lab numbers
	}
	d.su.overlay, d.su.dropEcho, d.su.silentRouters = s.Overlay, s.DropEcho, s.SilentRouters
	d.su.timeout, d.su.healthy = 9*time.Minute, time.Minute
	shape := *s
	d.su.shape = func(l *lab.Spec) {
		l.Spines, l.Racks, l.NodesPerRack, l.PodsPerNode = shape.Spines, shape.Racks, shape.NodesPerRack, shape.PodsPerNode
		l.SuperSpines, l.RacksPerPod = shape.SuperSpines, shape.RacksPerPod
		l.Zones = 0 // a zone per rack, up to 3 (SetDefaults): DefaultSpec's are its racks'
	}

	// The upper-tier switch: a spine, or an aggregation switch or a
	// super-spine.
	rack := 1 + rng.IntN(s.Racks)
	upper := fmt.Sprintf("spine%d", 1+rng.IntN(s.Spines))
	if s.SuperSpines > 0 {
		upper = fmt.Sprintf("agg%d%d", 1+rng.IntN(s.Racks/s.RacksPerPod), 1+rng.IntN(s.Spines))
		if rng.IntN(2) == 0 {
			upper = fmt.Sprintf("super%d", 1+rng.IntN(s.SuperSpines))
		}
	}
	up := fmt.Sprintf("spine%d", 1+rng.IntN(s.Spines)) // above rack
	if s.SuperSpines > 0 {
		up = fmt.Sprintf("agg%d%d", (rack-1)/s.RacksPerPod+1, 1+rng.IntN(s.Spines))
	}
	tor := fmt.Sprintf("tor%d", rack)
	from, to := tor, up
	if rng.IntN(2) == 0 {
		from, to = up, tor
	}
	hostRack := 1 + rng.IntN(s.Racks)
	host := fmt.Sprintf("n%d%d", hostRack, 1+rng.IntN(s.NodesPerRack))
	d.scenarios = []scenario{
		{name: "drawn: lossy " + upper, faults: []lab.Fault{{Kind: lab.FaultDeviceLoss, Device: upper, Permille: 50}}, kind: matrix.KindDevice, suspect: upper},
		{name: "drawn: lossy link " + from + "->" + to, faults: []lab.Fault{{Kind: lab.FaultLinkLoss, From: from, To: to, Permille: 50}}, kind: matrix.KindLink, suspect: from + "->" + to},
		{name: "drawn: bad NIC " + host, faults: []lab.Fault{{Kind: lab.FaultHostNIC, Host: host, Permille: 100}}, kind: matrix.KindHost, suspect: host,
			allowed: ownLink(host, fmt.Sprintf("tor%d", hostRack))},
	}
	if s.SilentRouters {
		// What a fabric whose routers never answer shows: which rack
		// pairs lose. With two fabric pods of two racks, no one rack is
		// in every losing pair of an upper switch's fault.
		d.scenarios[0].kind, d.scenarios[0].suspect = matrix.KindTier, "spine"
		d.scenarios[0].check = silentTier("spine")
		d.scenarios[1].kind, d.scenarios[1].suspect = matrix.KindTier, "uplinks of "+tor
		d.scenarios[1].check = silentTier("uplinks of " + tor)
	}
	if d.su.families != nil {
		d.scenarios = singleStack(d.scenarios)
	}
	return d
}

// String says what was drawn, for the log and a failure's message.
func (d drawnShape) String() string {
	s := d.spec
	s.IPv6 = d.su.ipv6
	fam := "dual-stack"
	if d.su.families != nil {
		fam = d.su.families[0] + " only"
	}
	pods := "no pods"
	if d.pods() {
		pods = "a pod per node"
	}
	return fmt.Sprintf("%s, %s; agents %s", s.Shape(), pods, fam)
}

// drawnSuite is the drawn shape of PROBER_LAB_SEED, or of drawnSeed.
func drawnSuite(t *testing.T) suite {
	seed := uint64(drawnSeed)
	if v := os.Getenv("PROBER_LAB_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("PROBER_LAB_SEED=%q: not a seed (a number)", v)
		}
		seed = n
	}
	d := drawShape(seed)
	t.Logf("seed %d: %s; faults: %s, %s, %s", seed, d, d.scenarios[0].name, d.scenarios[1].name, d.scenarios[2].name)
	su := d.su
	su.scenarios = func(context.Context, *testbed.Fabric) []scenario { return d.scenarios }
	return su
}

// TestDrawShape holds the draw to what the lab builds and a CI run
// carries, and to every network kind turning up.
func TestDrawShape(t *testing.T) {
	seen := map[string]int{}
	for seed := range uint64(300) {
		d := drawShape(seed)
		spec := lab.DefaultSpec()
		spec.Prefix = "drawn"
		d.su.shape(&spec)
		spec.IPv6, spec.Overlay, spec.DropEcho, spec.SilentRouters = d.su.ipv6, d.su.overlay, d.su.dropEcho, d.su.silentRouters
		spec.SetDefaults() // as lab.Up does
		if err := spec.Validate(); err != nil {
			t.Fatalf("seed %d (%s): %v", seed, d, err)
		}
		if n := spec.Racks * spec.NodesPerRack; n > 12 {
			t.Errorf("seed %d (%s): %d nodes, over the 12 a CI suite carries", seed, d, n)
		}
		if len(d.scenarios) != 3 {
			t.Fatalf("seed %d: %d scenarios, want 3", seed, len(d.scenarios))
		}
		for _, k := range []struct {
			on   bool
			kind string
		}{{spec.Overlay, "overlay"}, {spec.SilentRouters, "silent"}, {spec.DropEcho, "drop echo"}, {spec.SuperSpines > 0, "three tiers"},
			{d.pods(), "pods"}, {!d.pods(), "no pods"}, {d.su.families == nil, "dual-stack"}, {len(d.su.families) == 1 && d.su.ipv6, "ipv6 only"}, {!d.su.ipv6, "ipv4 only"}} {
			if k.on {
				seen[k.kind]++
			}
		}
	}
	for _, k := range []string{"overlay", "silent", "drop echo", "three tiers", "pods", "no pods", "dual-stack", "ipv6 only", "ipv4 only"} {
		if seen[k] < 20 {
			t.Errorf("%s drawn %d times in 300, want some", k, seen[k])
		}
	}
}
