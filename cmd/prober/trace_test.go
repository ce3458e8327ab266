package main

import (
	"encoding/json"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/probe"
)

func TestTraceFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no host", nil, "exactly one HOST is required"},
		{"two hosts", []string{"192.0.2.1", "192.0.2.2"}, "exactly one HOST is required"},
		{"flows", []string{"--flows", "0", "192.0.2.1"}, "--flows: 0 not in 1..256"},
		{"port", []string{"--port", "70000", "192.0.2.1"}, "--port: 70000 not in 1..65535"},
		{"probes", []string{"--probes", "101", "192.0.2.1"}, "--probes: 101 not in 1..100"},
		{"max-ttl", []string{"--max-ttl", "65", "192.0.2.1"}, "--max-ttl: 65 not in 1..64"},
		{"retries", []string{"--retries", "-1", "192.0.2.1"}, "--retries: -1 not in"},
		{"rate", []string{"--rate", "0", "192.0.2.1"}, "must be positive"},
		{"source", []string{"--source", "garbage", "192.0.2.1"}, `--source: "garbage" is not a unicast IP address`},
		{"source family", []string{"-4", "--source", "2001:db8::1", "192.0.2.1"}, "--source: 2001:db8::1 is not ipv4"},
		{"both families", []string{"-4", "-6", "192.0.2.1"}, "-4 and -6: pick one family"},
		{"sport-base", []string{"--sport-base", "80", "192.0.2.1"}, "--sport-base: 80 leaves no room"},
		{"unknown flag", []string{"--bogus", "192.0.2.1"}, "flag provided but not defined: -bogus"},
		// Flags after HOST are parsed too (nothing is sent: the value
		// is refused first).
		{"flag after host", []string{"192.0.2.1", "--flows", "300"}, "--flows: 300 not in 1..256"},
		{"unknown flag after host", []string{"192.0.2.1", "--bogus"}, "flag provided but not defined: -bogus"},
		{"two hosts around a flag", []string{"192.0.2.1", "--json", "192.0.2.2"}, "exactly one HOST is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runArgs(append([]string{"trace"}, tc.args...)...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d (stderr %q)", code, exitUsage, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q lacks %q", errOut, tc.want)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
}

// TestTraceNoPrivilege checks the message an operator without
// CAP_NET_RAW gets. The probe sockets are never opened, so nothing is
// sent to the documentation address.
func TestTraceNoPrivilege(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as root, which has CAP_NET_RAW; the non-root run of the suite covers this")
	}
	code, _, errOut := runArgs("trace", "--source", "127.0.0.1", "192.0.2.1")
	if code != exitRuntime || strings.Count(errOut, "CAP_NET_RAW") != 1 || !strings.Contains(errOut, "setcap cap_net_raw+ep") {
		t.Errorf("exit %d stderr %q, want %d naming CAP_NET_RAW once and how to grant it", code, errOut, exitRuntime)
	}
}

// reportFlow builds a four-hop flow trace from "a b c": "-" a silent hop,
// "~x" a hop inferred as x.
func reportFlow(t *testing.T, sport uint16, path string, sent, recv int) probe.FlowTrace {
	t.Helper()
	ft := probe.FlowTrace{SourcePort: sport, Reached: true, Sent: sent, Received: recv}
	for i, f := range strings.Fields(path) {
		h := probe.Hop{TTL: i + 1, Sent: 1, Received: 1}
		switch {
		case f == "-":
			h.Received = 0
		case strings.HasPrefix(f, "~"):
			h.Received, h.Inferred, h.Addr = 0, true, netip.MustParseAddr(f[1:])
		default:
			h.Addr = netip.MustParseAddr(f)
		}
		ft.Hops = append(ft.Hops, h)
	}
	dst := probe.Hop{TTL: len(ft.Hops) + 1, Addr: netip.MustParseAddr("192.0.2.99"), Sent: sent, Received: recv, Destination: true}
	ft.Hops = append(ft.Hops, dst)
	return ft
}

func TestTraceReport(t *testing.T) {
	t.Parallel()
	fts := []probe.FlowTrace{
		reportFlow(t, 64000, "192.0.2.1 198.51.100.1 203.0.113.1", 3, 3),
		reportFlow(t, 64001, "~192.0.2.1 ~198.51.100.1 203.0.113.1", 3, 3),
		reportFlow(t, 64002, "192.0.2.1 198.51.100.2 203.0.113.2", 10, 4),
		reportFlow(t, 64003, "192.0.2.1 198.51.100.2 203.0.113.2", 10, 5),
		reportFlow(t, 64004, "192.0.2.1 - -", 3, 3), // fits both paths: stands alone
	}
	// The lossy flows' middle hops answer fully, the far ToR and the
	// destination lose: the break starts after the spine.
	for i := 2; i <= 3; i++ {
		fts[i].Hops[2].Sent, fts[i].Hops[2].Received = 10, 4
	}
	cfg := probe.TraceConfig{Probes: 1}
	rep, err := newTraceReport("dst", netip.MustParseAddr("192.0.2.99"), netip.MustParseAddr("192.0.2.10"), 9808, cfg, matrix.Config{}, fts, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Paths) != 3 {
		t.Fatalf("%d paths, want 3: %+v", len(rep.Paths), rep.Paths)
	}
	byPorts := map[string]tracePath{}
	for _, p := range rep.Paths {
		byPorts[ports(p.SourcePorts)] = p
	}
	one, ok := byPorts["64000,64001"]
	if !ok {
		t.Fatalf("no path of 64000 and 64001 (the inferred flow joins the heard one): %v", slices.Collect(func(yield func(string) bool) {
			for k := range byPorts {
				yield(k)
			}
		}))
	}
	if one.Hops[0].Inferred != 1 || one.Hops[1].Inferred != 1 || one.Hops[2].Inferred != 0 || one.Hops[1].Received != 1 {
		t.Errorf("path 1 hops %+v: want hops 1 and 2 inferred for one flow, heard by the other", one.Hops)
	}
	lossy := byPorts["64002,64003"]
	if len(lossy.LossyPorts) != 2 || lossy.SuspectHop != 1 || !lossy.Hops[1].Suspect {
		t.Errorf("lossy path %+v: want both flows lossy, suspect hop 2", lossy)
	}
	if len(rep.Suspects) != 1 || rep.Suspects[0].Address != "198.51.100.2" || rep.Suspects[0].EndSent != 20 || rep.Suspects[0].EndReceived != 9 {
		t.Errorf("suspects %+v, want 198.51.100.2 with 9/20 end to end", rep.Suspects)
	}
	if _, ok := byPorts["64004"]; !ok {
		t.Errorf("a flow whose silent hops fit two paths must stand alone")
	}
	var flow64001 traceFlow
	for _, f := range rep.FlowList {
		if f.SourcePort == 64001 {
			flow64001 = f
		}
	}
	if !slices.Equal(flow64001.InferredTTLs, []int{1, 2}) {
		t.Errorf("flow 64001 inferredTTLs %v, want [1 2]", flow64001.InferredTTLs)
	}

	// From the flows alone: what the lossy flows cross and the clean
	// ones avoid; never the first hop, which every flow crosses.
	if len(rep.Inferred) == 0 || rep.Unlocated != nil {
		t.Errorf("inferred %+v, unlocated %+v: want suspects", rep.Inferred, rep.Unlocated)
	}
	for _, s := range rep.Inferred {
		if !slices.Equal(s.Through, []uint16{64002, 64003}) || s.AvoidLost != 0 || s.Sent != 20 || s.Lost != 11 {
			t.Errorf("inferred %s %s: through %v, %d/%d lost, %d lost avoiding it; want 64002,64003 with 11/20, 0",
				s.Kind, s.Name, s.Through, s.Lost, s.Sent, s.AvoidLost)
		}
	}

	var human strings.Builder
	rep.print(&human)
	t.Log(human.String())
	for _, want := range []string{"inferred from the flows", "3 distinct paths", "(inferred for 1 of 2 flows)", "<- SUSPECT", "198.51.100.2: 2 flows (64002,64003)", "LOSSY: 2 of 2 flows"} {
		if !strings.Contains(human.String(), want) {
			t.Errorf("human output lacks %q:\n%s", want, human.String())
		}
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"paths":`, `"suspects":`, `"sourcePorts":[64000,64001]`, `"inferred":1`, `"inferredTTLs":[1,2]`, `"address":"198.51.100.2"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("JSON lacks %s:\n%s", want, js)
		}
	}
}

// TestTraceProgressNotATerminal: progress to a pipe or log prints whole
// lines, no carriage returns.
func TestTraceProgressNotATerminal(t *testing.T) {
	t.Parallel()
	var buf strings.Builder // written by progress's goroutine, read after stop
	stop := progress(&buf, "tracing 32 flows to 198.18.0.1:80", time.Now().Add(-3*time.Second), 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	stop()
	got := buf.String()
	lines := strings.SplitAfter(got, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 || strings.Contains(got, "\r") {
		t.Fatalf("progress wrote %q, want whole lines and no carriage return", got)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "tracing 32 flows to 198.18.0.1:80... 3s") || !strings.HasSuffix(l, "\n") {
			t.Errorf("progress line %q, want %q ending in a newline", l, "tracing 32 flows to 198.18.0.1:80... 3s")
		}
	}
}
