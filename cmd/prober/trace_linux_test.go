//go:build linux

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
	"github.com/netprober/prober/matrix"
)

// traceLab is a leaf-spine (3 spines, racks of one node) whose routers
// keep Linux's default ICMP rate limit, with counters telling which spine
// each traced flow crossed.
type traceLab struct {
	f      *lab.Fabric
	dst    lab.Host
	sports []uint16
	reads  []func() map[uint16]uint64
	names  []string
}

// upTraceCmdLab builds a traceLab, dual-stack with ipv6, counting the
// flows of source ports base to base+flows-1.
func upTraceCmdLab(t *testing.T, flows, base int, ipv6 bool) *traceLab {
	l := &traceLab{f: labtest.Up(t, lab.Spec{Spines: 3, Racks: 2, NodesPerRack: 1, PodsPerNode: -1, IPv6: ipv6})}
	l.dst, _ = l.f.Host("n21")
	for p := range flows {
		l.sports = append(l.sports, uint16(base+p))
	}
	for _, r := range l.f.Routers {
		if r.Kind == lab.KindSpine {
			l.reads = append(l.reads, labtest.SourcePortCounters(t, r.Namespace, l.sports))
			l.names = append(l.names, r.Name)
		}
	}
	return l
}

// trace runs `prober trace` from n11.
func (l *traceLab) trace(t *testing.T, ctx context.Context, args ...string) (string, string, error) {
	cmd, err := l.f.Command(ctx, "n11", os.Args[0], append([]string{"trace"}, args...)...)
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

// report runs `prober trace` with args (which must hold --json) and
// decodes what it printed.
func (l *traceLab) report(t *testing.T, ctx context.Context, args ...string) traceJSON {
	t.Helper()
	out, errOut, err := l.trace(t, ctx, args...)
	if err != nil {
		t.Fatalf("prober trace: %v\n%s", err, errOut)
	}
	var rep traceJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	return rep
}

// crossed says which spine each flow crossed, by the spines' counters;
// a flow seen at two is an error: ECMP hashes what a flow holds constant.
func (l *traceLab) crossed(t *testing.T) map[uint16]string {
	t.Helper()
	out := map[uint16]string{}
	for i, read := range l.reads {
		for p, n := range read() {
			if n == 0 {
				continue
			}
			if prev, ok := out[p]; ok {
				t.Errorf("sport %d crossed both %s and %s", p, prev, l.names[i])
			}
			out[p] = l.names[i]
		}
	}
	return out
}

// traceJSON is what the tests read of `prober trace --json`.
type traceJSON struct {
	Paths []struct {
		SourcePorts []uint16 `json:"sourcePorts"`
		Hops        []struct {
			Address string `json:"address"`
		} `json:"hops"`
	} `json:"paths"`
	Suspects  []json.RawMessage    `json:"suspects"`
	Inferred  []matrix.FlowSuspect `json:"inferredSuspects"`
	Unlocated *matrix.Unlocated    `json:"unlocated"`
	Flows     []traceJSONFlow      `json:"flows"`
}

type traceJSONFlow struct {
	SourcePort uint16   `json:"sourcePort"`
	Hops       []string `json:"hops"`
	Inferred   []int    `json:"inferredTTLs"`
	Lossy      bool     `json:"lossy"`
}

// TestTraceCommand runs `prober trace --json` in a leaf-spine whose
// routers keep Linux's default ICMP rate limit, and checks every flow's
// spine, heard or inferred, against the spines' own counters. Then with
// -6 in the same leaf-spine dual-stack, whose routers hash the flow label
// too: a flow's probes must keep theirs, or its hops would mix spines.
func TestTraceCommand(t *testing.T) {
	t.Run("ipv4", func(t *testing.T) { testTraceCommand(t, false) })
	t.Run("ipv6", func(t *testing.T) { testTraceCommand(t, true) })
}

func testTraceCommand(t *testing.T, ipv6 bool) {
	const flows, base = 24, 63000
	l := upTraceCmdLab(t, flows, base, ipv6)
	f, dst := l.f, l.dst
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	trace := func(args ...string) (string, string, error) { return l.trace(t, ctx, args...) }

	target, family := dst.Addr, "-4"
	if ipv6 {
		target, family = dst.Addr6, "-6"
	}
	start := time.Now()
	out, errOut, err := trace(family, "--flows", strconv.Itoa(flows), "--sport-base", strconv.Itoa(base), "--port", "9808", "--probes", "1", "--json", target.String())
	if err != nil {
		t.Fatalf("prober trace: %v\n%s", err, errOut)
	}
	t.Logf("%d flows traced in %v", flows, time.Since(start).Round(time.Millisecond))
	var rep traceJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	crossed := l.crossed(t)
	hops := f.Hops()
	inferred := 0
	for _, fl := range rep.Flows {
		if len(fl.Hops) != 4 || fl.Hops[3] != target.String() {
			t.Errorf("sport %d: hops %v, want 4 ending at %v", fl.SourcePort, fl.Hops, target)
			continue
		}
		if got := hops[fl.Hops[1]]; got != crossed[fl.SourcePort] {
			t.Errorf("sport %d: spine %q (hops %v, inferred %v), the flow crossed %q", fl.SourcePort, got, fl.Hops, fl.Inferred, crossed[fl.SourcePort])
		}
		if slices.Contains(fl.Inferred, 2) {
			inferred++
		}
	}
	if len(rep.Flows) != flows || len(rep.Paths) != 3 || len(rep.Suspects)+len(rep.Inferred) != 0 || rep.Unlocated != nil {
		t.Errorf("%d flows, %d paths, %d suspects, %d inferred, unlocated %v; want %d, 3 (one per spine), 0, 0, none",
			len(rep.Flows), len(rep.Paths), len(rep.Suspects), len(rep.Inferred), rep.Unlocated, flows)
	}
	t.Logf("%d of %d spine hops inferred", inferred, flows)

	// No name server is reachable from the namespace: nothing leaves it.
	if _, errOut, err := trace("no-such-host.invalid"); err == nil || !strings.Contains(errOut, `cannot resolve host "no-such-host.invalid"`) {
		t.Errorf("unresolvable host: err %v stderr %q", err, errOut)
	}
}

// TestTraceInfersLossyLink: 30% loss on one spine-to-ToR link, the
// routers at Linux's default ICMP rate limit, so the hops' answers show
// no break to read. From the flows alone `prober trace` must name that
// link's ends or the spine, and nothing a clean flow crosses; with the
// matrix's config, by the matrix's device names.
func TestTraceInfersLossyLink(t *testing.T) {
	const flows, base = 24, 63100
	l := upTraceCmdLab(t, flows, base, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := l.f.Inject(ctx, lab.Fault{Kind: lab.FaultLinkLoss, From: "spine2", To: "tor2", Permille: 300}); err != nil {
		t.Fatal(err)
	}
	hops := l.f.Hops()
	conf := filepath.Join(t.TempDir(), "matrix.yaml")
	b, _ := json.Marshal(map[string]any{"listen": "198.18.0.1:9809", "agents": []string{"http://198.18.0.2:9808"}, "hops": hops})
	if err := os.WriteFile(conf, b, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--flows", strconv.Itoa(flows), "--sport-base", strconv.Itoa(base), "--port", "9808", "--probes", "10", "--json", l.dst.Addr.String()}
	for _, named := range []bool{false, true} {
		a := args
		if named {
			a = append([]string{"--matrix-config", conf}, args...)
		}
		start := time.Now()
		rep := l.report(t, ctx, a...)
		via := l.crossed(t)
		var throughSpine2, lossy []uint16
		for _, fl := range rep.Flows {
			if via[fl.SourcePort] == "spine2" {
				throughSpine2 = append(throughSpine2, fl.SourcePort)
			}
			if fl.Lossy {
				lossy = append(lossy, fl.SourcePort)
			}
		}
		t.Logf("named %v: traced in %v; flows through spine2 %v, lossy %v; %d break suspects", named, time.Since(start).Round(time.Millisecond), throughSpine2, lossy, len(rep.Suspects))
		if len(throughSpine2) == 0 {
			t.Fatal("no flow crossed spine2")
		}
		if rep.Unlocated != nil || len(rep.Inferred) == 0 {
			t.Errorf("named %v: %d inferred suspects, unlocated %+v; want suspects", named, len(rep.Inferred), rep.Unlocated)
		}
		// The lossy link's ends by address: spine2's, and tor2's where
		// spine2's flows enter it.
		linkEnds := map[string]bool{}
		for _, fl := range rep.Flows {
			for _, a := range fl.Hops {
				if via[fl.SourcePort] == "spine2" && (hops[a] == "spine2" || hops[a] == "tor2") {
					linkEnds[a] = true
				}
			}
		}
		for _, s := range rep.Inferred {
			t.Logf("  %s %s %v score %.2f: through %v, lossy %v, unknown %v; avoiding it %d/%d lost", s.Kind, s.Name, s.Addresses, s.Score, s.Through, s.Lossy, s.Unknown, s.AvoidLost, s.AvoidSent)
			for _, p := range s.Through {
				if via[p] != "spine2" {
					t.Errorf("named %v: %s %s: flow %d crosses it, and it crossed %s, not spine2", named, s.Kind, s.Name, p, via[p])
				}
			}
			ends := slices.ContainsFunc(s.Addresses, func(a string) bool { return linkEnds[a] })
			if named {
				from, to, _ := strings.Cut(s.Name, "->")
				ends = s.Kind == matrix.KindDevice && s.Name == "spine2" || s.Kind == matrix.KindLink && (from == "spine2" || to == "spine2")
			}
			if !ends {
				t.Errorf("named %v: suspect %s %s %v is not the lossy link's end or the spine", named, s.Kind, s.Name, s.Addresses)
			}
		}
	}

	// Nothing past the first hop answers: nothing can be named, and the
	// trace says past which hop the lossy flows' loss lies.
	for _, r := range l.f.Routers {
		if r.Name != "tor1" {
			if err := l.f.Silence(r.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	rep := l.report(t, ctx, args...)
	via := l.crossed(t)
	u := rep.Unlocated
	t.Logf("routers past tor1 silent: %d inferred, unlocated %+v", len(rep.Inferred), u)
	if len(rep.Inferred) != 0 || u == nil || hops[u.Past] != "tor1" || u.PastTTL != 1 || len(u.Lossy) == 0 {
		t.Fatalf("silent past the first hop: inferred %+v, unlocated %+v; want none, and the loss past tor1 at TTL 1", rep.Inferred, u)
	}
	for _, p := range u.Lossy {
		if via[p] != "spine2" {
			t.Errorf("silent past the first hop: flow %d read lossy, and it crossed %s", p, via[p])
		}
	}
}

// TestTraceSizedEndsAtBlackHole: spine2 drops what is longer than 1,200
// bytes towards tor2 and tells no sender. 1,400-byte probes (--size)
// reach n21 over the other spines and end at spine2 over it, the last
// hop a large packet reaches, where the trace's inference names spine2
// or its link; bare SYNs reach n21 over every spine. A size above the
// first hop's MTU is refused with the route in the message.
func TestTraceSizedEndsAtBlackHole(t *testing.T) {
	const flows, base = 12, 63300
	l := upTraceCmdLab(t, flows, base, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := l.f.Inject(ctx, lab.Fault{Kind: lab.FaultMTUBlackhole, From: "spine2", To: "tor2", MTU: 1200}); err != nil {
		t.Fatal(err)
	}
	hops := l.f.Hops()
	args := []string{"--flows", strconv.Itoa(flows), "--sport-base", strconv.Itoa(base), "--port", "9808", "--json", l.dst.Addr.String()}
	// Large first: the routers' ICMP rate limits start full.
	sized := l.report(t, ctx, append([]string{"--size", "1400"}, args...)...)
	plain := l.report(t, ctx, args...)
	for _, fl := range plain.Flows {
		if fl.Lossy {
			t.Errorf("bare SYNs: flow %d lossy; small packets pass the black hole", fl.SourcePort)
		}
	}
	via := l.crossed(t) // the bare SYNs' spines: the large ones die before the counters
	through, ending := 0, 0
	for _, fl := range sized.Flows {
		last := ""
		for _, a := range slices.Backward(fl.Hops) {
			if a != "" {
				last = hops[a]
				break
			}
		}
		switch {
		case via[fl.SourcePort] == "spine2":
			through++
			if !fl.Lossy || last != "" && last != "spine2" {
				t.Errorf("1,400 bytes over spine2: flow %d lossy %v, hops %q; want lossy, ending at spine2", fl.SourcePort, fl.Lossy, fl.Hops)
			}
			if last == "spine2" {
				ending++
			}
		case fl.Lossy:
			t.Errorf("1,400 bytes over %s: flow %d lossy", via[fl.SourcePort], fl.SourcePort)
		}
	}
	t.Logf("%d flows over spine2, %d heard to end there; inferred %d", through, ending, len(sized.Inferred))
	if through == 0 || ending == 0 {
		t.Fatalf("%d flows crossed spine2, %d of them seen to end there; want some", through, ending)
	}
	if len(sized.Inferred) == 0 {
		t.Errorf("nothing inferred from %d flows ending at spine2 (unlocated %+v)", through, sized.Unlocated)
	}
	for _, s := range sized.Inferred {
		if !slices.ContainsFunc(s.Addresses, func(a string) bool { return hops[a] == "spine2" }) {
			t.Errorf("inferred %s %s %v, not spine2 or a link of it", s.Kind, s.Name, s.Addresses)
		}
	}

	_, errOut, err := l.trace(t, ctx, "--size", "1600", "--flows", "1", "--sport-base", strconv.Itoa(base), "--port", "9808", l.dst.Addr.String())
	if err == nil || !strings.Contains(errOut, "1600-byte probes do not fit the route to "+l.dst.Addr.String()) {
		t.Errorf("--size 1600 over a 1,500-byte first hop: err %v, stderr %q; want the route named", err, errOut)
	}
}
