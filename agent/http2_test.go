package agent

import (
	"context"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/probe/probetest"
)

func TestEstablishedBlackhole(t *testing.T) {
	t.Parallel()
	allOK := outcomeCounts{OK: 24}
	cases := []struct {
		name string
		ev   blackholeEvidence
		want bool
	}{
		{"connection declared dead, new flows pass", blackholeEvidence{PingTimeout: true, LostInRow: 3, DeadAfter: 3, Syn: allOK}, true},
		{"deadAfter PINGs lost, not yet reset", blackholeEvidence{LostInRow: 3, DeadAfter: 3, Syn: allOK}, true},
		{"fresh connection never answered", blackholeEvidence{PingTimeout: true, LostInRow: 1, DeadAfter: 3, Syn: allOK}, true},
		{"one new flow of 24 lost", blackholeEvidence{PingTimeout: true, LostInRow: 3, DeadAfter: 3, Syn: outcomeCounts{OK: 23, Lost: 1}}, true},
		{"PINGs lost, fewer than deadAfter", blackholeEvidence{LostInRow: 2, DeadAfter: 3, Syn: allOK}, false},
		{"no PING lost", blackholeEvidence{DeadAfter: 3, Syn: allOK}, false},
		{"fully lossy path", blackholeEvidence{PingTimeout: true, LostInRow: 3, DeadAfter: 3, Syn: outcomeCounts{Lost: 24}}, false},
		{"lossy path, new flows too", blackholeEvidence{PingTimeout: true, LostInRow: 3, DeadAfter: 3, Syn: outcomeCounts{OK: 19, Lost: 5}}, false},
		{"dead backend answers RST", blackholeEvidence{PingTimeout: true, LostInRow: 3, DeadAfter: 3, Syn: outcomeCounts{Refused: 24}}, false},
		{"one of two backends dead", blackholeEvidence{PingTimeout: true, LostInRow: 3, DeadAfter: 3, Syn: outcomeCounts{OK: 12, Refused: 12}}, false},
		{"no tcp_syn evidence", blackholeEvidence{PingTimeout: true, LostInRow: 3, DeadAfter: 3}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := establishedBlackhole(tc.ev); got != tc.want {
				t.Errorf("establishedBlackhole(%+v) = %v, want %v", tc.ev, got, tc.want)
			}
		})
	}
}

// TestAgentHTTP2 pings the agent's own responder over h2c (no privilege
// needed: http2_ping uses plain sockets), counts a refused target, and
// checks that a departed target's series go.
func TestAgentHTTP2(t *testing.T) {
	port, closedPort := freePort(t), freePort(t) // nothing listens on closedPort: dials are refused
	// The agent pings its own responder as "peer".
	a, base := loopbackAgent(t, `
name: lo1
class: node
listen: 127.0.0.1:`+itoa(port)+`
probing: {interval: 50ms, timeout: 500ms, window: 5s, protocols: [http2_ping]}
targets:
  - {name: peer, address: 127.0.0.1, class: node, port: `+itoa(port)+`}
  - {name: closed, address: 127.0.0.1, class: node, port: `+itoa(closedPort)+`}
  - {name: skipped, address: 127.0.0.1, class: node, port: `+itoa(port)+`, http2: none}
`)
	byName := func(obs api.Observations) map[string]api.Target {
		m := map[string]api.Target{}
		for _, tg := range obs.Targets {
			m[tg.Name] = tg
		}
		return m
	}
	var ts map[string]api.Target
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ts = byName(getObservations(t, base))
		if p := ts["peer"].Protocols; len(p) == 1 && p[0].Sent >= 5 && len(ts["closed"].Protocols) == 1 && ts["closed"].Protocols[0].Sent > 0 {
			break
		}
	}
	peer := ts["peer"]
	if len(peer.Protocols) != 1 {
		t.Fatalf("peer: protocols %+v, want http2_ping", peer.Protocols)
	}
	if p := peer.Protocols[0]; p.Protocol != "http2_ping" || p.Sent < 5 || p.Lost != 0 || p.RTTP50 <= 0 || p.LastResult != "ok" {
		t.Errorf("peer: %+v", p)
	}
	// Refused, then held back by the backoff (local_error, not loss).
	if p := ts["closed"].Protocols; len(p) != 1 || p[0].Sent == 0 || p[0].Lost != 0 || p[0].RTTP50 != 0 {
		t.Errorf("closed: %+v, want refused without loss or RTT", p)
	}
	if len(ts["skipped"].Protocols) != 0 {
		t.Errorf("http2: none was pinged: %+v", ts["skipped"].Protocols)
	}
	if peer.EstablishedFlowBlackhole || ts["closed"].EstablishedFlowBlackhole {
		t.Error("black hole reported on loopback")
	}
	if n := testutil.ToFloat64(a.http2.resets.WithLabelValues("node_to_node", "ipv4", "closed", "refused")); n < 1 {
		t.Errorf("closed: %v refused resets, want >= 1", n)
	}

	// The responder speaks h2c with prior knowledge on the same port.
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 2 * time.Second}).Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
		t.Errorf("h2c /healthz: %s %s", resp.Proto, resp.Status)
	}

	if problems, err := testutil.GatherAndLint(a.Registry()); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", err, problems)
	}
	promtoolCheck(t, get(t, base+"/metrics"))
	// 3 targets pinged or not: resets for 2 targets x 5 reasons, the gauge for 2.
	if n := testutil.CollectAndCount(a.http2.resets); n != 10 {
		t.Errorf("%d reset series, want 10", n)
	}
	if n := testutil.CollectAndCount(a.Registry(), "prober_established_flow_blackhole"); n != 2 {
		t.Errorf("%d black-hole series, want 2", n)
	}
	if err := a.SetTargets(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(a.http2.resets); n != 0 {
		t.Errorf("%d reset series after the targets left, want 0", n)
	}
	if n := testutil.CollectAndCount(a.Registry(), "prober_established_flow_blackhole"); n != 0 {
		t.Errorf("%d black-hole series after the targets left, want 0", n)
	}
}

// Without per-target labels the resets are by path and the black-hole
// gauge says whether any target of the path has one.
func TestAgentHTTP2PerTargetOff(t *testing.T) {
	port := freePort(t)
	_, base := loopbackAgent(t, `
name: lo1
class: node
listen: 127.0.0.1:`+itoa(port)+`
metrics: {perTarget: false}
probing: {interval: 50ms, timeout: 500ms, window: 5s, protocols: [http2_ping]}
targets:
  - {name: peer, address: 127.0.0.1, class: node, port: `+itoa(port)+`}
  - {name: peer2, address: 127.0.0.1, class: node, port: `+itoa(port)+`}
`)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if obs := getObservations(t, base); len(obs.Targets) == 2 && len(obs.Targets[1].Protocols) == 1 && obs.Targets[1].Protocols[0].Sent > 0 {
			break
		}
	}
	m := get(t, base+"/metrics")
	for _, want := range []string{
		`prober_http2_connection_resets_total{family="ipv4",path="node_to_node",reason="ping_timeout"} 0`,
		`prober_established_flow_blackhole{family="ipv4",path="node_to_node"} 0`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("exposition lacks %s:\n%s", want, grep(m, "prober_"))
		}
	}
	if strings.Contains(m, "target=") {
		t.Errorf("perTarget false: a target label:\n%s", grep(m, "target="))
	}
	promtoolCheck(t, m)
}

// TestAgentHTTP2ReconnectsDoNotLeak makes the agent's pingers reconnect
// 1,000 times to a server that closes every connection it accepts, then
// checks that goroutines and file descriptors did not grow with them and
// that all are gone once the agent stops.
func TestAgentHTTP2ReconnectsDoNotLeak(t *testing.T) {
	const reconnects = 1000
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	goroutines0, fds0 := runtime.NumGoroutine(), probetest.OpenFDs(t)

	cfg := `
name: lo1
class: node
listen: 127.0.0.1:0
probing: {interval: 10ms, timeout: 500ms, window: 5s, protocols: [http2_ping], maxProbesPerSecond: 2000}
targets:
`
	var names []string
	for i := range 10 {
		names = append(names, "t"+itoa(i))
		cfg += "  - {name: t" + itoa(i) + ", address: 127.0.0.1, class: node, port: " + itoa(ln.Addr().(*net.TCPAddr).Port) + "}\n"
	}
	a, _ := loopbackAgent(t, cfg)
	waitAccepted := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); accepted.Load() < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections accepted in 20s, want %d", accepted.Load(), n)
			}
		}
	}
	waitAccepted(reconnects / 5)
	goroutines1, fds1 := runtime.NumGoroutine(), probetest.OpenFDs(t)
	waitAccepted(reconnects)
	goroutines2, fds2 := runtime.NumGoroutine(), probetest.OpenFDs(t)
	t.Logf("goroutines %d before, %d after %d reconnects, %d after %d; fds %d, %d, %d",
		goroutines0, goroutines1, reconnects/5, goroutines2, accepted.Load(), fds0, fds1, fds2)
	// 10 targets hold at most one connection each (2 goroutines with its
	// reader); the bounds leave room for one in flight per target.
	if goroutines2 > goroutines1+20 || fds2 > fds1+10 {
		t.Errorf("growth over %d reconnects: goroutines %d -> %d, fds %d -> %d", reconnects, goroutines1, goroutines2, fds1, fds2)
	}
	var resets float64
	for _, reason := range []string{"reset", "refused", "ping_timeout", "goaway", "tls"} {
		for _, name := range names {
			resets += testutil.ToFloat64(a.http2.resets.WithLabelValues("node_to_node", "ipv4", name, reason))
		}
	}
	if resets < reconnects*0.9 {
		t.Errorf("%v resets counted for %d reconnects", resets, accepted.Load())
	}

	if err := a.SetTargets(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	// The agent's own listener, server and Run goroutines remain.
	if g, fds := probetest.Settle(t, goroutines0, fds0, 8); g > goroutines0+8 || fds > fds0+8 {
		buf := make([]byte, 1<<16)
		t.Fatalf("after the targets left: %d goroutines (%d before), %d fds (%d before)\n%s",
			g, goroutines0, fds, fds0, buf[:runtime.Stack(buf, true)])
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
