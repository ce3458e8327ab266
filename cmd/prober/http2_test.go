package main

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
	"github.com/netprober/prober/probe"
	"github.com/netprober/prober/testbed"
)

// TestHTTP2EstablishedFlowBlackhole is issue 3's end-to-end test: the
// real agent binary in a pod namespace pings, over HTTP/2, the lab LB's
// VIP (nftables DNAT to the agents on both nodes), one node directly, and
// a TLS agent with the right and a wrong CA, at the default schedule
// (interval 1s, timeout 1s, deadAfter 3). Then (b) the LB forgets its
// established flows (seed 001), (e) the LB drops everything, and (c) a
// backend agent is killed.
func TestHTTP2EstablishedFlowBlackhole(t *testing.T) {
	f := labtest.Up(t, lab.Spec{Spines: 1, Racks: 2, NodesPerRack: 1, PodsPerNode: 1, Zones: 1, LB: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	host := func(name string) lab.Host {
		h, ok := f.Host(name)
		if !ok {
			t.Fatalf("lab has no host %s", name)
		}
		return h
	}
	n11, n21, pod := host("n11"), host("n21"), host("n11p1")

	// The TLS agent's certificate names n21 by address and as n21.lab; a
	// second self-signed certificate is the wrong CA.
	certPEM, keyPEM, err := probe.SelfSignedCert([]string{"n21.lab", n21.Addr.String()}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	wrongPEM, _, err := probe.SelfSignedCert([]string{"n21.lab", n21.Addr.String()}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"cert.pem": certPEM, "key.pem": keyPEM, "wrong-ca.pem": wrongPEM}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	var agents []*testbed.Agent
	defer func() {
		for _, a := range agents {
			a.Close()
			if t.Failed() {
				t.Logf("agent %s log:\n%s", a.Name(), a.LogTail(15))
			}
		}
	}()
	start := func(host string, cfg *config.Agent) *testbed.Agent {
		t.Helper()
		a, err := testbed.StartAgent(ctx, f, testbed.AgentSpec{Prober: testProber(), Host: host, Config: cfg, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
		return a
	}
	h2only := config.Probing{Protocols: []probe.Protocol{probe.ProtocolHTTP2Ping}}
	start(n11.Name, testbed.AgentConfig(n11, h2only))
	backend := start(n21.Name, testbed.AgentConfig(n21, h2only))
	tlsCfg := testbed.AgentConfig(n21, h2only)
	tlsCfg.Name, tlsCfg.Listen = "n21tls", netip.AddrPortFrom(n21.Addr, 9443).String()
	tlsCfg.TLS = &config.ServerTLS{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}
	start(n21.Name, tlsCfg)
	proberCfg := testbed.AgentConfig(pod, config.Probing{Window: config.Duration(10 * time.Second), Flows: 4,
		Protocols: []probe.Protocol{probe.ProtocolTCPSYN, probe.ProtocolHTTP2Ping}}, n21)
	proberCfg.Targets = append([]config.Target{testbed.VIPTarget(f.VIP)}, proberCfg.Targets...)
	proberCfg.Targets = append(proberCfg.Targets,
		config.Target{Name: "n21-tls", Address: n21.Addr.String(), Class: config.ClassNode, Port: 9443,
			HTTP2: config.HTTP2TLS, CAFile: filepath.Join(dir, "cert.pem"), ServerName: "n21.lab"},
		config.Target{Name: "n21-wrong-ca", Address: n21.Addr.String(), Class: config.ClassNode, Port: 9443,
			HTTP2: config.HTTP2TLS, CAFile: filepath.Join(dir, "wrong-ca.pem")})
	prober := start(pod.Name, proberCfg)
	for _, a := range agents {
		if err := a.WaitHealthy(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	// observe polls the prober's observations every 100ms until cond
	// holds for them, or within passes.
	var obs api.Observations
	observe := func(within time.Duration, cond func() bool) bool {
		t.Helper()
		for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
			if obs, err = prober.Observations(ctx); err != nil {
				t.Fatal(err)
			}
			if cond() || time.Now().After(deadline) {
				return cond()
			}
		}
	}
	target := func(name string) api.Target {
		for _, tg := range obs.Targets {
			if tg.Name == name {
				return tg
			}
		}
		t.Fatalf("no target %s in the observations", name)
		return api.Target{}
	}
	proto := func(name, protocol string) api.Protocol {
		for _, p := range target(name).Protocols {
			if p.Protocol == protocol {
				return p
			}
		}
		return api.Protocol{}
	}
	blackholes := func() (names []string) {
		for _, tg := range obs.Targets {
			if tg.EstablishedFlowBlackhole {
				names = append(names, tg.Name)
			}
		}
		return names
	}
	resets := func(target string, reasons ...string) float64 {
		t.Helper()
		text, err := prober.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, r := range reasons {
			sum += metricValue(text, "prober_http2_connection_resets_total", `target="`+target+`"`, `reason="`+r+`"`)
		}
		return sum
	}

	// (a) and (d): healthy, and TLS verified by the right CA only.
	if !observe(15*time.Second, func() bool {
		return proto("vip", "http2_ping").Sent >= 5 && proto("n21", "http2_ping").Sent >= 5 && proto("n21-tls", "http2_ping").Sent >= 5
	}) {
		t.Fatalf("the pinger did not get going within 15s: %+v", obs.Targets)
	}
	for _, name := range []string{"vip", "n21", "n21-tls"} {
		if p := proto(name, "http2_ping"); p.Lost != 0 || p.LastResult != "ok" || p.RTTP50 <= 0 {
			t.Errorf("(a) healthy %s http2_ping: %+v, want no loss", name, p.Stats)
		}
		if p := proto(name, "tcp_syn"); p.Sent == 0 || p.Lost != 0 {
			t.Errorf("(a) healthy %s tcp_syn: %+v, want no loss", name, p.Stats)
		}
	}
	if p := proto("n21-wrong-ca", "http2_ping"); p.Lost != 0 || p.LastResult == "ok" {
		t.Errorf("(d) wrong CA: %+v, want refused (not loss)", p.Stats)
	}
	if n := resets("n21-wrong-ca", "tls"); n < 1 {
		t.Errorf("(d) wrong CA: %v tls resets, want >= 1", n)
	}
	if n := resets("n21-tls", "tls", "refused", "reset", "ping_timeout", "goaway"); n != 0 {
		var by []string
		for _, r := range []string{"tls", "refused", "reset", "ping_timeout", "goaway"} {
			if k := resets("n21-tls", r); k > 0 {
				by = append(by, fmt.Sprintf("%s %v", r, k))
			}
		}
		t.Errorf("(d) right CA: %v resets (%s), want 0", n, strings.Join(by, ", "))
	}
	if bh := blackholes(); len(bh) > 0 {
		t.Errorf("(a) healthy: black hole reported for %v", bh)
	}

	// (b) The LB forgets the flows open now; new flows pass.
	synLost := proto("vip", "tcp_syn").Lost
	if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultLBForget}); err != nil {
		t.Fatal(err)
	}
	injected := time.Now()
	if !observe(20*time.Second, func() bool { return target("vip").EstablishedFlowBlackhole }) {
		t.Fatalf("(b) no black hole reported within 20s of lb-forget: vip %+v", target("vip").Protocols)
	}
	detected := time.Since(injected)
	if p := proto("vip", "tcp_syn"); p.Lost != synLost {
		t.Errorf("(b) tcp_syn to the VIP lost %d probes under lb-forget, want none", p.Lost-synLost)
	}
	if bh := blackholes(); len(bh) != 1 {
		t.Errorf("(b) black holes %v, want only vip (n21 is not behind the LB)", bh)
	}
	if text, err := prober.Metrics(ctx); err != nil || metricValue(text, "prober_established_flow_blackhole", `target="vip"`) != 1 {
		t.Errorf("(b) prober_established_flow_blackhole{target=\"vip\"} is not 1 (err %v)", err)
	}
	if n := resets("vip", "ping_timeout"); n < 1 {
		t.Errorf("(b) %v ping_timeout resets on the VIP, want >= 1", n)
	}
	// The flag is raised by the reset that followed the lost PINGs, so an
	// "ok" seen from now on is a PING on the redialled connection. (Sent
	// is a window count: once the window is full it no longer grows.)
	if !observe(5*time.Second, func() bool { return proto("vip", "http2_ping").LastResult == "ok" }) {
		t.Errorf("(b) the redial through the LB did not recover within 5s: %+v", proto("vip", "http2_ping").Stats)
	}
	redialed := time.Since(injected) - detected
	if err := f.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	cleared := time.Now()
	lost := proto("vip", "http2_ping").Lost
	// Healthy within 2 intervals of the clear: the PINGs of those two
	// intervals are answered.
	time.Sleep(2*time.Second + 500*time.Millisecond)
	observe(0, func() bool { return true })
	if p := proto("vip", "http2_ping"); p.Lost != lost || p.LastResult != "ok" {
		t.Errorf("(b) after the clear: %+v, want no new loss", p.Stats)
	}
	// The report holds for one window (10s) after the swallowed
	// connection, then clears since the PINGs succeed again.
	if !observe(15*time.Second, func() bool { return !target("vip").EstablishedFlowBlackhole }) {
		t.Errorf("(b) the black hole was still reported 15s after the clear")
	}
	held := time.Since(injected)
	t.Logf("(b) lb-forget: black hole reported %v after the fault, redial healthy %v later; report cleared %v after the fault (%v after the clear)",
		detected.Round(10*time.Millisecond), redialed.Round(10*time.Millisecond), held.Round(10*time.Millisecond), time.Since(cleared).Round(10*time.Millisecond))

	// (e) The LB drops everything: PINGs and new flows die alike, which
	// is an outage, not a black hole.
	synLost = proto("vip", "tcp_syn").Lost
	if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultLBLoss, Permille: 1000}); err != nil {
		t.Fatal(err)
	}
	if observe(6*time.Second, func() bool { return target("vip").EstablishedFlowBlackhole }) {
		t.Errorf("(e) black hole reported under total loss at the LB")
	}
	if p := proto("vip", "tcp_syn"); p.Lost == synLost || resets("vip", "ping_timeout") < 2 {
		t.Errorf("(e) total loss did not show: tcp_syn %+v", p.Stats)
	}
	if err := f.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	cleared = time.Now()
	// Redials that time out do not back off (only answered failures
	// do), so the connection is back within an interval or two of the
	// clear, however long the outage was. Every PING of the outage was
	// lost, so the first "ok" is the redialled connection's.
	if !observe(5*time.Second, func() bool { return proto("vip", "http2_ping").LastResult == "ok" }) {
		t.Errorf("(e) not healthy within 5s of the clear: %+v", proto("vip", "http2_ping").Stats)
	}
	t.Logf("(e) total loss at the LB: no black hole; healthy %v after the clear", time.Since(cleared).Round(10*time.Millisecond))

	// (c) A backend dies: its kernel resets the connection and refuses
	// redials. Not a black hole.
	before := resets("n21", "reset", "refused")
	if err := backend.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for deadline := time.Now().Add(10 * time.Second); resets("n21", "reset", "refused") == before; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("(c) no reset or refused counted for n21 within 10s of killing its agent")
		}
	}
	t.Logf("(c) backend killed: reset/refused counted after %v", time.Since(killed).Round(10*time.Millisecond))
	if observe(4*time.Second, func() bool { return len(blackholes()) > 0 }) {
		t.Errorf("(c) black hole reported for %v after a backend died", blackholes())
	}
}

// metricValue sums the samples of name whose labels include every one
// of labels (`target="vip"`) in Prometheus text exposition.
func metricValue(text, name string, labels ...string) float64 {
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		i := strings.LastIndexByte(line, '}')
		match := i > 0
		for _, l := range labels {
			match = match && strings.Contains(line[:i], l)
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(line[i+1:]), 64); match && err == nil {
			sum += v
		}
	}
	return sum
}
