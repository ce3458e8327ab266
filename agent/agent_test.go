package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_RAW) for raw sockets; CI runs as root")
	}
}

// loopbackAgent runs an agent on 127.0.0.1 probing listeners on loopback.
func loopbackAgent(t *testing.T, yaml string) (*Agent, string) {
	t.Helper()
	return loopbackAgentWith(t, yaml, nil)
}

// loopbackAgentWith is loopbackAgent with edit applied before Run.
func loopbackAgentWith(t *testing.T, yaml string, edit func(*Agent)) (*Agent, string) {
	t.Helper()
	cfg, err := config.ParseAgent("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(runtimeConfig(t, cfg), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of cancel")
		}
	})
	return a, "http://" + a.Addr().String()
}

// runtimeConfig is ConfigFrom of a loaded file, which has no target it
// refuses.
func runtimeConfig(t *testing.T, cfg *config.Agent) Config {
	t.Helper()
	rc, err := ConfigFrom(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// openPort listens on a loopback port until the test ends: a target that
// answers SYNs.
func openPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func TestAgentLoopback(t *testing.T) {
	needRoot(t)
	port := openPort(t)
	a, base := loopbackAgent(t, `
name: lo1
class: pod
listen: 127.0.0.1:0
probing: {interval: 50ms, timeout: 500ms, window: 10s, flows: 3, sourcePortBase: 62000, maxTargets: 4}
targets:
  - {name: up, address: 127.0.0.1, class: node, port: `+itoa(port)+`}
  - {name: vip, address: 127.0.0.1, class: lb, port: `+itoa(port)+`}
`)
	deadline := time.Now().Add(5 * time.Second)
	var obs api.Observations
	for time.Now().Before(deadline) {
		obs = getObservations(t, base)
		if len(obs.Targets) == 2 && obs.Targets[0].Protocols[1].Sent >= 9 && obs.Targets[1].Protocols[0].Sent >= 3 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if obs.Agent.Name != "lo1" || obs.Agent.Class != "pod" || obs.WindowSeconds != 10 {
		t.Errorf("identity: %+v window %v", obs.Agent, obs.WindowSeconds)
	}
	if len(obs.Targets) != 2 {
		t.Fatalf("%d targets, want 2", len(obs.Targets))
	}
	paths := map[string]string{}
	for _, tg := range obs.Targets {
		paths[tg.Name] = tg.Path
		var protos []string
		for _, p := range tg.Protocols {
			protos = append(protos, p.Protocol)
			if p.Sent == 0 || p.Lost != 0 || p.RTTP50 <= 0 {
				t.Errorf("%s/%s: %+v", tg.Name, p.Protocol, p.Stats)
			}
		}
		// A VIP gets no icmp: kube-proxy's never answers echo.
		if want := map[string][]string{"up": {"icmp", "tcp_syn"}, "vip": {"tcp_syn"}}[tg.Name]; !slices.Equal(protos, want) {
			t.Errorf("%s probed over %v, want %v", tg.Name, protos, want)
		}
		syn := tg.Protocols[len(tg.Protocols)-1]
		if syn.Protocol != "tcp_syn" || len(syn.Flows) != 3 {
			t.Fatalf("%s: tcp_syn with %d flows, want 3", tg.Name, len(syn.Flows))
		}
		ports := map[uint16]bool{}
		for _, f := range syn.Flows {
			ports[f.SourcePort] = true
		}
		if len(ports) != 3 {
			t.Errorf("%s: flows share source ports: %+v", tg.Name, syn.Flows)
		}
	}
	if paths["up"] != "pod_to_node" || paths["vip"] != "pod_to_lb" {
		t.Errorf("paths %v", paths)
	}

	if problems, err := testutil.GatherAndLint(a.Registry()); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", err, problems)
	}
	if n := testutil.CollectAndCount(a.m.sent); n != 3 {
		t.Errorf("%d sent series, want 3 (up: icmp and tcp_syn; vip: tcp_syn)", n)
	}
	if m := get(t, base+"/metrics"); strings.Contains(m, `path="pod_to_lb",protocol="icmp"`) {
		t.Errorf("/metrics has icmp series of the lb target:\n%s", grep(m, `path="pod_to_lb",protocol="icmp"`))
	}

	// The VIP's backends, as discovery learns them from its Service's
	// endpoints, are reported sorted; a change of backends does not
	// restart its probes.
	synPorts := func(o api.Observations, name string) []uint16 {
		var out []uint16
		for _, tg := range o.Targets {
			if tg.Name == name {
				for _, f := range tg.Protocols[len(tg.Protocols)-1].Flows {
					out = append(out, f.SourcePort)
				}
			}
		}
		return out
	}
	ts := slices.Clone(a.cfg.Targets)
	ts[1].Backends = []string{"up", "other"}
	if err := a.SetTargets(context.Background(), ts); err != nil {
		t.Fatal(err)
	}
	withBackends := getObservations(t, base)
	if b := withBackends.Targets[1].Backends; !slices.Equal(b, []string{"other", "up"}) {
		t.Errorf("vip backends %v, want [other up]", b)
	}
	if before, after := synPorts(obs, "vip"), synPorts(withBackends, "vip"); !slices.Equal(before, after) {
		t.Errorf("new backends restarted the target: source ports %v, then %v", before, after)
	}
	if sent := withBackends.Targets[1].Protocols[0].Sent; sent < obs.Targets[1].Protocols[0].Sent {
		t.Errorf("new backends reset the vip's window: %d probes sent, before %d", sent, obs.Targets[1].Protocols[0].Sent)
	}
	ts[1].Backends = nil
	if err := a.SetTargets(context.Background(), ts); err != nil {
		t.Fatal(err)
	}
	if b := getObservations(t, base).Targets[1].Backends; b != nil {
		t.Errorf("vip backends %v after they went, want none", b)
	}

	// A target that leaves stops being probed and its series go.
	if err := a.SetTargets(context.Background(), slices.Clone(a.cfg.Targets)[:1]); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(a.m.sent); n != 2 {
		t.Errorf("after removing vip: %d sent series, want 2 (up's)", n)
	}
	metrics := get(t, base+"/metrics")
	if strings.Contains(metrics, `target="vip"`) {
		t.Error("/metrics still has target=\"vip\"")
	}
	for _, want := range []string{"prober_build_info{", `prober_probes_sent_total{family="ipv4",path="pod_to_node",protocol="tcp_syn",target="up"}`, "prober_rtt_seconds_bucket{", `prober_replies_unmatched_total{protocol="tcp_syn",reason="late"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	got := getObservations(t, base)
	if len(got.Targets) != 1 {
		t.Fatalf("observations after removal: %d targets", len(got.Targets))
	}
	// The same peer with new labels (discovery marking a silent node)
	// keeps its flows and reports the labels; the agent's own labels
	// follow SetLabels (its node's rack, learnt from discovery).
	kept := slices.Clone(a.cfg.Targets)[:1]
	kept[0].Labels = map[string]string{"ready": "unknown"}
	if err := a.SetTargets(context.Background(), kept); err != nil {
		t.Fatal(err)
	}
	a.SetLabels(map[string]string{"rack": "r9"})
	relabelled := getObservations(t, base)
	if relabelled.Targets[0].Labels["ready"] != "unknown" || relabelled.Agent.Labels["rack"] != "r9" {
		t.Errorf("after relabelling: target labels %v, agent labels %v", relabelled.Targets[0].Labels, relabelled.Agent.Labels)
	}
	sports := func(o api.Observations) []uint16 {
		var out []uint16
		for _, f := range o.Targets[0].Protocols[1].Flows {
			out = append(out, f.SourcePort)
		}
		return out
	}
	if !slices.Equal(sports(got), sports(relabelled)) {
		t.Errorf("relabelling restarted the target: source ports %v, then %v", sports(got), sports(relabelled))
	}
	promtoolCheck(t, metrics)
	if body := get(t, base+"/healthz"); strings.TrimSpace(body) != "ok" {
		t.Errorf("healthz %q", body)
	}
}

func TestAgentPerTargetOff(t *testing.T) {
	needRoot(t)
	a, base := loopbackAgent(t, `
name: lo2
class: node
listen: 127.0.0.1:0
metrics: {perTarget: false}
probing: {interval: 50ms, protocols: [icmp], sourcePortBase: 62500, maxTargets: 2}
targets: [{name: self, address: 127.0.0.1, class: node, port: 9}]
`)
	time.Sleep(300 * time.Millisecond)
	if m := get(t, base+"/metrics"); strings.Contains(m, "target=") || !strings.Contains(m, `prober_probes_sent_total{family="ipv4",path="node_to_node",protocol="icmp"}`) {
		t.Errorf("perTarget false: target label present or series missing:\n%s", grep(m, "prober_probes_sent_total"))
	}
	if problems, err := testutil.GatherAndLint(a.Registry()); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", err, problems)
	}
}

func TestNewFailsBeforeStarting(t *testing.T) {
	needRoot(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg, err := config.ParseAgent("t.yaml", []byte("name: x\nclass: node\nlisten: "+ln.Addr().String()+"\nprobing: {sourcePortBase: 63000, maxTargets: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(runtimeConfig(t, cfg), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("New on a taken port: %v", err)
	}
	// Its sockets were released: a second agent can reserve the same ports.
	ln.Close()
	cfg.Listen = "127.0.0.1:0"
	a, err := New(runtimeConfig(t, cfg), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New after a failed New: %v", err)
	}
	a.closeEngines()
	if a.src != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("source %v", a.src)
	}
}

// promtoolCheck runs `promtool check metrics` on an exposition. Without
// promtool the check is skipped, unless PROBER_REQUIRE_TOOLS is set (make
// test sets it after installing promtool, so a broken install fails).
func promtoolCheck(t *testing.T, exposition string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("PROBER_REQUIRE_TOOLS") != "" {
			t.Fatal("promtool not found; `make test` installs it (Debian package prometheus)")
		}
		t.Log("promtool not found: skipping promtool check metrics")
		return
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func getObservations(t *testing.T, base string) api.Observations {
	t.Helper()
	var obs api.Observations
	if err := json.Unmarshal([]byte(get(t, base+api.ObservationsPath)), &obs); err != nil {
		t.Fatal(err)
	}
	return obs
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return b.String()
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestAgentRefusingVIPIsLoss: a VIP that refuses new connections (a
// RST, or kube-proxy's REJECT of a Service without endpoints) fails its
// clients, so for an lb target a refused SYN is loss; an agent that
// refuses (it is restarting) is no loss. A new lb target counts from its
// first answer, or from its settle time: kube-proxy may not have
// programmed a Service the agent has just learned of.
func TestAgentRefusingVIPIsLoss(t *testing.T) {
	needRoot(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens: the kernel answers SYNs with RST
	// Half of it must hold 10 probes at 50 ms after a start under -race
	// on a loaded 2-core machine: 2 s held 2 (make test beside a
	// benchmark).
	const settle = 4 * time.Second
	start := time.Now()
	_, base := loopbackAgentWith(t, `
name: lo1
class: node
listen: 127.0.0.1:0
probing: {interval: 50ms, timeout: 500ms, window: 10s, flows: 2, sourcePortBase: 62100, maxTargets: 4}
targets:
  - {name: restarting, address: 127.0.0.1, class: node, port: `+itoa(closed)+`, http2: none}
  - {name: no-endpoints, address: 127.0.0.1, class: lb, port: `+itoa(closed)+`, http2: none}
  - {name: answering, address: 127.0.0.1, class: lb, port: `+itoa(openPort(t))+`, http2: none}
`, func(a *Agent) { a.lbSettle = settle })
	syn := func() map[string]api.Stats {
		m := map[string]api.Stats{}
		for _, tg := range getObservations(t, base).Targets {
			for _, p := range tg.Protocols {
				if p.Protocol == "tcp_syn" {
					m[tg.Name] = p.Stats
				}
			}
		}
		return m
	}
	// Before the settle time a new lb target counts from its first
	// answer: the one answering at once, the refusing one not at all.
	for time.Since(start) < settle/2 && syn()["answering"].Sent < 10 {
		time.Sleep(50 * time.Millisecond)
	}
	early := syn()
	if time.Since(start) < settle {
		if s := early["no-endpoints"]; s.Sent != 0 {
			t.Errorf("a refusing lb target before its settle time: %+v, want nothing counted", s)
		}
		if s := early["answering"]; s.Sent < 10 || s.Lost != 0 {
			t.Errorf("an answering lb target: %+v, want 10+ sent at once and none lost", s)
		}
	}
	deadline := time.Now().Add(settle + 5*time.Second)
	var late map[string]api.Stats
	for time.Now().Before(deadline) {
		if late = syn(); late["restarting"].Sent >= 10 && late["no-endpoints"].Sent >= 10 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s := late["restarting"]; s.Sent < 10 || s.Lost != 0 {
		t.Errorf("a refusing node target: %+v, want 10+ sent and none lost", s)
	}
	if s := late["no-endpoints"]; s.Sent < 10 || s.Lost != s.Sent {
		t.Errorf("a refusing lb target after its settle time: %+v, want every probe lost", s)
	}
}

// TestAgentDualStack: an agent with a source of each family probes a
// dual-stack peer once per family, on engines of that family, and keeps
// the two apart in its observations and series; removing one family's
// target leaves the other's windows alone.
func TestAgentDualStack(t *testing.T) {
	needRoot(t)
	port4 := openPort(t)
	ln6, err := net.Listen("tcp6", "[::1]:"+itoa(port4))
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	t.Cleanup(func() { ln6.Close() })
	a, base := loopbackAgent(t, `
name: lo1
class: node
listen: 127.0.0.1:0
source: 127.0.0.1,::1
probing: {interval: 50ms, timeout: 500ms, window: 10s, flows: 2, sourcePortBase: 62100, maxTargets: 4, trace: {budgetPerMinute: 0}}
targets:
  - {name: up, address: 127.0.0.1, class: node, port: `+itoa(port4)+`}
  - {name: up, address: "::1", class: node, port: `+itoa(port4)+`}
`)
	done := func(o api.Observations) bool {
		if len(o.Targets) != 2 {
			return false
		}
		for _, tg := range o.Targets {
			for _, p := range tg.Protocols {
				if p.Sent < 4 {
					return false
				}
			}
		}
		return true
	}
	var obs api.Observations
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if obs = getObservations(t, base); done(obs) {
			break
		}
	}
	if !slices.Equal(obs.Agent.Addresses, []string{"127.0.0.1", "::1"}) {
		t.Errorf("agent addresses %v, want both sources", obs.Agent.Addresses)
	}
	if len(obs.Targets) != 2 {
		t.Fatalf("%d targets, want up over each family: %+v", len(obs.Targets), obs.Targets)
	}
	for i, want := range []struct{ family, addr string }{{api.FamilyIPv4, "127.0.0.1"}, {api.FamilyIPv6, "::1"}} {
		tg := obs.Targets[i]
		if tg.Name != "up" || tg.Family != want.family || tg.Address != want.addr {
			t.Errorf("targets[%d]: %s %s %s, want up %s %s", i, tg.Name, tg.Family, tg.Address, want.family, want.addr)
		}
		var protos []string
		for _, p := range tg.Protocols {
			protos = append(protos, p.Protocol)
			if p.Sent < 4 || p.Lost != 0 || p.RTTP50 <= 0 {
				t.Errorf("up %s/%s: %+v, want answered probes", want.family, p.Protocol, p.Stats)
			}
		}
		if !slices.Equal(protos, []string{"icmp", "tcp_syn"}) {
			t.Errorf("up %s probed over %v", want.family, protos)
		}
	}
	m := get(t, base+"/metrics")
	for _, fam := range api.Families {
		if want := `prober_probes_sent_total{family="` + fam + `",path="node_to_node",protocol="tcp_syn",target="up"}`; !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The IPv6 target leaves; the IPv4 one keeps its flows.
	before := obs.Targets[0].Protocols[1].Flows
	if err := a.SetTargets(context.Background(), slices.Clone(a.cfg.Targets)[:1]); err != nil {
		t.Fatal(err)
	}
	after := getObservations(t, base)
	if len(after.Targets) != 1 || after.Targets[0].Family != api.FamilyIPv4 {
		t.Fatalf("after removing up over IPv6: %+v", after.Targets)
	}
	if got := after.Targets[0].Protocols[1].Flows; len(got) != len(before) || got[0].SourcePort != before[0].SourcePort || got[0].Sent < before[0].Sent {
		t.Errorf("the IPv4 target restarted: flows %+v, before %+v", got, before)
	}
	if strings.Contains(get(t, base+"/metrics"), `family="ipv6",path="node_to_node",protocol="tcp_syn",target="up"`) {
		t.Error("the IPv6 target's series outlived it")
	}
}
