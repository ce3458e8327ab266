package tracereport

import (
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/probe"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the reports")

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

// lossyTrace is five flows over three paths: two clean (one of them heard
// only in part), one whose two flows lose past 198.51.100.2, and one flow
// whose silent hops fit both of the others.
func lossyTrace(t *testing.T) Trace {
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
	return Trace{
		Host: "dst", Target: netip.MustParseAddr("192.0.2.99"), Source: netip.MustParseAddr("192.0.2.10"), Port: 9808,
		ProbesPerHop: 1, Duration: 1500 * time.Millisecond, Flows: fts, At: t0,
	}
}

// t0 is the traces' time: the report reads no clock.
var t0 = time.Unix(1_700_000_000, 0)

func TestReport(t *testing.T) {
	t.Parallel()
	rep, err := New(lossyTrace(t), matrix.Config{})
	if err != nil {
		t.Fatal(err)
	}
	untimed := lossyTrace(t)
	untimed.At = time.Time{}
	if _, err := New(untimed, matrix.Config{}); err == nil || !strings.Contains(err.Error(), "Trace.At") {
		t.Errorf("a trace without its time: %v, want refused", err)
	}
	if len(rep.Paths) != 3 {
		t.Fatalf("%d paths, want 3: %+v", len(rep.Paths), rep.Paths)
	}
	byPorts := map[string]Path{}
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
	var flow64001 Flow
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
	Print(&human, rep)
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
	// Without the matrix's hops, nothing is named: `prober trace --json`
	// without --matrix-config is what it always was.
	if regexp.MustCompile(`"address":"[^"]*","name"`).Match(js) {
		t.Errorf("JSON names a hop without a hops config:\n%s", js)
	}
}

// TestReportNames: the matrix's hops config names the hops and the break
// suspects by device, longest prefix first; an address it does not
// cover, and a silent hop, stay unnamed.
func TestReportNames(t *testing.T) {
	t.Parallel()
	cfg := matrix.Config{Hops: map[string]string{
		"198.51.100.2":    "spine2",
		"198.51.100.0/24": "spines",
		"192.0.2.1":       "tor1",
	}}
	rep, err := New(lossyTrace(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"192.0.2.1": "tor1", "198.51.100.1": "spines", "198.51.100.2": "spine2", "203.0.113.1": "", "203.0.113.2": "", "192.0.2.99": "", "": ""}
	for _, p := range rep.Paths {
		for _, h := range p.Hops {
			if w, ok := want[h.Address]; !ok || h.Name != w {
				t.Errorf("hop %d %q named %q, want %q", h.TTL, h.Address, h.Name, w)
			}
		}
	}
	if len(rep.Suspects) != 1 || rep.Suspects[0].Name != "spine2" {
		t.Errorf("suspects %+v, want 198.51.100.2 named spine2", rep.Suspects)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"address":"198.51.100.2","name":"spine2","sourcePorts":[64002,64003]`, `"address":"192.0.2.1","name":"tor1","sent"`, `"address":"203.0.113.1","sent"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("JSON lacks %s:\n%s", want, js)
		}
	}
	var human strings.Builder
	Print(&human, rep)
	for _, want := range []string{"198.51.100.2 (spine2)  ", "198.51.100.2 (spine2): 2 flows (64002,64003)", "192.0.2.1 (tor1)"} {
		if !strings.Contains(human.String(), want) {
			t.Errorf("human output lacks %q:\n%s", want, human.String())
		}
	}
}

// TestReportGolden pins the whole report, human and JSON, so that moving
// it (out of cmd/prober) or naming hops changes nothing else: plain is
// what `prober trace` printed before names existed. Run with -update to
// rewrite the files, then read their diff.
func TestReportGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  matrix.Config
	}{
		{"plain", matrix.Config{}},
		{"named", matrix.Config{Hops: map[string]string{"198.51.100.2": "spine2", "203.0.113.0/24": "tors", "192.0.2.1": "gw"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := lossyTrace(t)
			tr.Flows[0].Hops[1].RTT = 1234567 * time.Nanosecond
			tr.Flows[4].Reached = false
			tr.Flows[4].Hops = tr.Flows[4].Hops[:3]
			rep, err := New(tr, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var human strings.Builder
			Print(&human, rep)
			js, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			// Since is the clock's: the report's only moving part.
			js = regexp.MustCompile(`"since": "[^"]*"`).ReplaceAll(js, []byte(`"since": "X"`))
			golden(t, tc.name+".txt.golden", human.String())
			golden(t, tc.name+".json.golden", string(js))
		})
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs; got:\n%s\nwant:\n%s", path, got, want)
	}
}
