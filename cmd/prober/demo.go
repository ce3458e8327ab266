package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/lab"
)

// pairDemo is issue 2's two-namespace loss demo: two nodes in two racks
// joined through a spine, an agent on each, a healthy window, then random
// loss on one link, and what the agents measured. TestNamespaceLoss runs
// it; `prober lab demo` runs the full fabric (labdemo.go).
type pairDemoOptions struct {
	exe      string   // the prober binary the agents run as
	env      []string // added to the agents' environment
	prefix   string
	permille int
	window   time.Duration
	out      io.Writer
}

// pairMeasure is what one agent measured towards its peer, by protocol.
type pairMeasure map[string]api.Protocol // "n11/tcp_syn"

type pairDemoResult struct{ healthy, faulty pairMeasure }

// pairDemo builds the fabric, runs the agents through a healthy and a
// faulty phase and returns both measurements. Everything it creates is
// removed before it returns, also on error or cancellation.
func pairDemo(ctx context.Context, o pairDemoOptions) (res pairDemoResult, err error) {
	step := func(format string, args ...any) { fmt.Fprintf(o.out, "==> "+format+"\n", args...) }
	spec := lab.Spec{Prefix: o.prefix, Spines: 1, Racks: 2, NodesPerRack: 1, PodsPerNode: -1, Zones: 1}
	spec.SetDefaults()
	step("building the fabric: n11 - tor1 - spine1 - tor2 - n21 (namespaces %s-*)", o.prefix)
	if err := lab.Down(o.prefix); err != nil { // leftovers of a crashed run
		return res, fmt.Errorf("removing an earlier lab: %w", err)
	}
	f, err := lab.Up(ctx, spec, slog.New(slog.DiscardHandler))
	if err != nil {
		return res, err
	}
	defer func() {
		step("cleaning up")
		err = errors.Join(err, lab.Down(o.prefix))
	}()
	dir, err := os.MkdirTemp("", "prober-demo-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)

	nodes := f.Nodes()
	if len(nodes) != 2 {
		return res, fmt.Errorf("want 2 nodes, the fabric has %d", len(nodes))
	}
	var agents []*demoAgent
	defer func() {
		for _, a := range agents {
			a.stop()
		}
	}()
	for i, n := range nodes {
		peer := nodes[1-i]
		a, err := startDemoAgent(ctx, f, o, dir, n, peer)
		if err != nil {
			return res, err
		}
		agents = append(agents, a)
		step("agent %s started on %s, probing %s (%s) over icmp and 4 tcp_syn flows", n.Name, n.Addr, peer.Name, peer.Addr)
	}
	for _, a := range agents {
		if err := a.waitHealthy(ctx, 10*time.Second); err != nil {
			return res, err
		}
	}

	step("healthy fabric: measuring for one window (%s)", o.window)
	if err := waitProgress(ctx, o.out, o.window+o.window/10); err != nil {
		return res, err
	}
	if res.healthy, err = measure(ctx, agents); err != nil {
		return res, err
	}
	printMeasure(o.out, res.healthy)

	fault := lab.Fault{Kind: lab.FaultLinkLoss, From: "spine1", To: "tor2", Permille: o.permille}
	step("injecting %d%% random loss on the spine1 -> tor2 link (nftables numgen in %s-spine1)", o.permille/10, o.prefix)
	if err := f.Inject(ctx, fault); err != nil {
		return res, err
	}
	step("measuring for one window (%s)", o.window)
	if err := waitProgress(ctx, o.out, o.window+o.window/10); err != nil {
		return res, err
	}
	if res.faulty, err = measure(ctx, agents); err != nil {
		return res, err
	}
	printMeasure(o.out, res.faulty)
	fmt.Fprintf(o.out, "    n11 -> n21 loses its requests on the link, n21 -> n11 its replies: both see about %d%%.\n", o.permille/10)
	return res, f.Clear(ctx)
}

type demoAgent struct {
	name, url, log string
	cmd            *exec.Cmd
	client         *http.Client
}

func startDemoAgent(ctx context.Context, f *lab.Fabric, o pairDemoOptions, dir string, self, peer lab.Host) (*demoAgent, error) {
	// A lost probe holds its flow until the timeout, so a short one keeps
	// the sample count up under loss; the lab's RTT is about 100 µs.
	cfg := fmt.Sprintf(`name: %s
class: node
listen: %s:9808
labels: {rack: %s, zone: %s}
log: json
probing:
  interval: 10ms
  timeout: 50ms
  window: %s
  flows: 4
  protocols: [icmp, tcp_syn]
  maxProbesPerSecond: 2000
  maxTargets: 4
targets:
  - {name: %s, address: %s, class: node, port: 9808, labels: {rack: %s}}
`, self.Name, self.Addr, self.Rack, self.Zone, o.window, peer.Name, peer.Addr, peer.Rack)
	return startLabAgent(ctx, f, o.exe, o.env, dir, self, cfg)
}

// startLabAgent writes cfg and starts `prober agent` with it inside
// host's namespace, its log in dir.
func startLabAgent(ctx context.Context, f *lab.Fabric, exe string, env []string, dir string, host lab.Host, cfg string) (*demoAgent, error) {
	path := filepath.Join(dir, host.Name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, host.Name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd, err := f.Command(ctx, host.Namespace, exe, "agent", "--config", path)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	if err := lab.Start(cmd); err != nil {
		return nil, fmt.Errorf("start agent %s: %w", host.Name, err)
	}
	return &demoAgent{
		name: host.Name, url: "http://" + host.Addr.String() + ":9808", log: logPath, cmd: cmd,
		client: lab.HTTPClient(host.Namespace, 2*time.Second),
	}, nil
}

// stop ends the agent with SIGTERM and waits for it.
func (a *demoAgent) stop() {
	if a.cmd.ProcessState == nil {
		a.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { a.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			a.cmd.Process.Kill()
			<-done
		}
	}
	a.client.CloseIdleConnections()
}

// failure describes an agent that is not serving, with its log's tail.
func (a *demoAgent) failure(err error) error {
	b, _ := os.ReadFile(a.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return fmt.Errorf("agent %s: %w; its log ends:\n  %s", a.name, err, strings.Join(lines[max(0, len(lines)-5):], "\n  "))
}

func (a *demoAgent) waitHealthy(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := a.client.Get(a.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		if time.Now().After(deadline) {
			return a.failure(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (a *demoAgent) observations(ctx context.Context) (api.Observations, error) {
	var obs api.Observations
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.url+api.ObservationsPath, nil)
	resp, err := a.client.Do(req)
	if err != nil {
		return obs, a.failure(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return obs, a.failure(errors.New(resp.Status))
	}
	return obs, json.NewDecoder(resp.Body).Decode(&obs)
}

// metrics returns the agent's /metrics exposition.
func (a *demoAgent) metrics(ctx context.Context) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.url+"/metrics", nil)
	resp, err := a.client.Do(req)
	if err != nil {
		return "", a.failure(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func measure(ctx context.Context, agents []*demoAgent) (pairMeasure, error) {
	m := pairMeasure{}
	for _, a := range agents {
		obs, err := a.observations(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range obs.Targets {
			for _, p := range t.Protocols {
				m[a.name+"/"+p.Protocol] = p
			}
		}
	}
	return m, nil
}

func printMeasure(w io.Writer, m pairMeasure) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "    agent\tprotocol\tsent\tlost\tloss\trtt p50\tflows' loss\t")
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := m[k]
		agent, proto, _ := strings.Cut(k, "/")
		var flows []string
		for _, f := range p.Flows {
			flows = append(flows, fmt.Sprintf("%.0f%%", 100*f.LossRatio))
		}
		fmt.Fprintf(tw, "    %s\t%s\t%d\t%d\t%.1f%%\t%s\t%s\t\n", agent, proto, p.Sent, p.Lost, 100*p.LossRatio,
			time.Duration(p.RTTP50*float64(time.Second)).Round(time.Microsecond), strings.Join(flows, " "))
	}
	tw.Flush()
}

// waitProgress waits d, drawing a progress bar while windows fill.
func waitProgress(ctx context.Context, w io.Writer, d time.Duration) error {
	const width = 30
	start := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		done := min(time.Since(start), d)
		n := int(float64(width) * float64(done) / float64(d))
		fmt.Fprintf(w, "\r    [%s%s] %4.1fs / %.0fs", strings.Repeat("#", n), strings.Repeat(".", width-n), done.Seconds(), d.Seconds())
		if done >= d {
			fmt.Fprintln(w)
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return ctx.Err()
		case <-tick.C:
		}
	}
}
