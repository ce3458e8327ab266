//go:build linux

package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
)

// TestTraceCommand runs `prober trace --json` in a leaf-spine whose
// routers keep Linux's default ICMP rate limit, and checks every flow's
// spine, heard or inferred, against the spines' own counters.
func TestTraceCommand(t *testing.T) {
	f := labtest.Up(t, lab.Spec{Spines: 3, Racks: 2, NodesPerRack: 1, PodsPerNode: -1})
	dst, _ := f.Host("n21")
	const flows, base = 24, 63000
	var sports []uint16
	for p := range uint16(flows) {
		sports = append(sports, base+p)
	}
	var reads []func() map[uint16]uint64
	var names []string
	for _, r := range f.Routers {
		if r.Kind == lab.KindSpine {
			reads = append(reads, labtest.SourcePortCounters(t, r.Namespace, sports))
			names = append(names, r.Name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	trace := func(args ...string) (string, string, error) {
		cmd, err := f.Command(ctx, "n11", os.Args[0], append([]string{"trace"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(os.Environ(), "PROBER_TEST_AS_MAIN=1")
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := lab.Start(cmd); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		return out.String(), errOut.String(), err
	}

	start := time.Now()
	out, errOut, err := trace("--flows", strconv.Itoa(flows), "--sport-base", strconv.Itoa(base), "--port", "9808", "--probes", "1", "--json", dst.Addr.String())
	if err != nil {
		t.Fatalf("prober trace: %v\n%s", err, errOut)
	}
	t.Logf("%d flows traced in %v", flows, time.Since(start).Round(time.Millisecond))
	var rep struct {
		Paths []struct {
			SourcePorts []uint16 `json:"sourcePorts"`
			Hops        []struct {
				Address string `json:"address"`
			} `json:"hops"`
		} `json:"paths"`
		Suspects []json.RawMessage `json:"suspects"`
		Flows    []struct {
			SourcePort uint16   `json:"sourcePort"`
			Hops       []string `json:"hops"`
			Inferred   []int    `json:"inferredTTLs"`
		} `json:"flows"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	crossed := map[uint16]string{}
	for i, read := range reads {
		for p, n := range read() {
			if n > 0 {
				crossed[p] = names[i]
			}
		}
	}
	hops := f.Hops()
	inferred := 0
	for _, fl := range rep.Flows {
		if len(fl.Hops) != 4 || fl.Hops[3] != dst.Addr.String() {
			t.Errorf("sport %d: hops %v, want 4 ending at %v", fl.SourcePort, fl.Hops, dst.Addr)
			continue
		}
		if got := hops[fl.Hops[1]]; got != crossed[fl.SourcePort] {
			t.Errorf("sport %d: spine %q (hops %v, inferred %v), the flow crossed %q", fl.SourcePort, got, fl.Hops, fl.Inferred, crossed[fl.SourcePort])
		}
		if slices.Contains(fl.Inferred, 2) {
			inferred++
		}
	}
	if len(rep.Flows) != flows || len(rep.Paths) != 3 || len(rep.Suspects) != 0 {
		t.Errorf("%d flows, %d paths, %d suspects; want %d, 3 (one per spine), 0", len(rep.Flows), len(rep.Paths), len(rep.Suspects), flows)
	}
	t.Logf("%d of %d spine hops inferred", inferred, flows)

	// No name server is reachable from the namespace: nothing leaves it.
	if _, errOut, err := trace("no-such-host.invalid"); err == nil || !strings.Contains(errOut, `cannot resolve host "no-such-host.invalid"`) {
		t.Errorf("unresolvable host: err %v stderr %q", err, errOut)
	}
}
