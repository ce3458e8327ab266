package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/netprober/prober/config"
	"github.com/netprober/prober/hub"
	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/matrix"
)

// fabricOptions describe a lab fabric with agents on every host and the
// matrix: what `prober lab demo` runs, and what the scenario tests drive.
type fabricOptions struct {
	exe      string   // the prober binary the agents run as
	env      []string // added to the agents' environment
	spec     lab.Spec
	interval time.Duration // the agents' probe interval
	window   time.Duration // the agents' window and the matrix's
	listen   string        // the matrix's address in the root namespace
	out      io.Writer     // progress lines; nil for none
	logger   *slog.Logger  // the matrix's log
}

// fabricRun is a running fabric: namespaces, agents, the matrix.
type fabricRun struct {
	opts   fabricOptions
	f      *lab.Fabric
	dir    string
	agents []*demoAgent
	hub    *hub.Hub
	stop   context.CancelFunc
	done   chan error
	start  time.Time // when the agents were healthy
}

func (r *fabricRun) startedAt() time.Time { return r.start }

// startFabric builds the fabric, starts a node-class agent per node and a
// pod-class agent per pod (like the two DaemonSets), and the matrix. On
// error everything started is stopped and removed.
func startFabric(ctx context.Context, o fabricOptions) (r *fabricRun, err error) {
	if o.out == nil {
		o.out = io.Discard
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	r = &fabricRun{opts: o}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.close())
			r = nil
		}
	}()
	step := func(format string, args ...any) { fmt.Fprintf(o.out, "==> "+format+"\n", args...) }
	s := o.spec
	step("building the fabric: %d spines, %d racks x %d nodes, %d pod(s) per node, LB %v (namespaces %s-*)",
		s.Spines, s.Racks, s.NodesPerRack, max(s.PodsPerNode, 0), s.LB, s.Prefix)
	if err := lab.Down(s.Prefix); err != nil {
		return r, fmt.Errorf("removing an earlier lab: %w", err)
	}
	if r.f, err = lab.Up(ctx, s, slog.New(slog.DiscardHandler)); err != nil {
		return r, err
	}
	if r.dir, err = os.MkdirTemp("", "prober-lab-"); err != nil {
		return r, err
	}
	var urls []string
	for _, h := range r.f.Hosts {
		a, err := startLabAgent(ctx, r.f, o.exe, o.env, r.dir, h, r.agentConfig(h))
		if err != nil {
			return r, err
		}
		r.agents = append(r.agents, a)
		urls = append(urls, a.url)
	}
	step("started %d agents: a node-class agent on every node, a pod-class agent in every pod", len(r.agents))
	for _, a := range r.agents {
		if err := a.waitHealthy(ctx, 15*time.Second); err != nil {
			return r, err
		}
	}
	r.start = time.Now()

	mcfg := &config.Matrix{Listen: o.listen, Agents: urls, GroupBy: "node", Hops: r.f.Hops(),
		Interval: config.Duration(2 * time.Second), Window: config.Duration(o.window)}
	mcfg.SetDefaults()
	if err := mcfg.Validate(); err != nil {
		return r, fmt.Errorf("matrix config: %w", err)
	}
	// The matrix runs in this process, in the root namespace, so its page
	// is reachable on loopback; its pulls dial from inside the first
	// node's namespace, from where every agent is routed.
	transport := lab.HTTPClient(r.f.Nodes()[0].Namespace, mcfg.Timeout.D()).Transport
	if r.hub, err = hub.New(mcfg, o.logger, hub.Options{Transport: transport}); err != nil {
		return r, err
	}
	hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stop, r.done = stop, make(chan error, 1)
	go func() { r.done <- r.hub.Run(hctx) }()
	step("matrix running: http://%s/", r.hub.Addr())
	return r, nil
}

// agentConfig is a host's agent configuration: nodes probe every other
// node and the LB's VIP; pods probe every other pod and every node (the
// paths seed 004's engineer compared by hand).
func (r *fabricRun) agentConfig(h lab.Host) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nclass: %s\nlisten: %s:9808\nlabels: {rack: %s, zone: %s, node: %s}\nlog: json\n",
		h.Name, h.Class, h.Addr, h.Rack, h.Zone, h.Node)
	// The trace budget is higher than in production (30/min): a lab has
	// no switch CPU to protect, and the demo should name a device in
	// seconds, not after the periodic traces of a few minutes.
	fmt.Fprintf(&b, "probing:\n  interval: %s\n  timeout: 1s\n  window: %s\n  flows: 8\n  protocols: [icmp, tcp_syn, http2_ping]\n"+
		"  maxProbesPerSecond: 1000\n  maxTargets: 32\n  trace: {budgetPerMinute: 600}\ntargets:\n",
		r.opts.interval, r.opts.window)
	for _, t := range r.f.Hosts {
		if t.Name == h.Name || (h.Class == lab.ClassNode && t.Class == lab.ClassPod) {
			continue
		}
		fmt.Fprintf(&b, "  - {name: %s, address: %s, class: %s, port: 9808, labels: {rack: %s, zone: %s, node: %s}}\n",
			t.Name, t.Addr, t.Class, t.Rack, t.Zone, t.Node)
	}
	if h.Class == lab.ClassNode && r.f.VIP.IsValid() {
		// The agents behind the VIP serve h2c; an lb target defaults to TLS.
		fmt.Fprintf(&b, "  - {name: vip, address: %s, class: lb, port: 9808, http2: h2c}\n", r.f.VIP)
	}
	return b.String()
}

// diagnosis and snapshot are the matrix's latest round.
func (r *fabricRun) diagnosis() matrix.Diagnosis { return r.hub.Diagnosis() }
func (r *fabricRun) snapshot() matrix.Snapshot   { return r.hub.Snapshot() }

// waitFor polls the matrix every second until cond holds or within
// passes, drawing progress when o.out is set. It returns how long it took.
func (r *fabricRun) waitFor(ctx context.Context, within time.Duration, what string, cond func(matrix.Diagnosis, matrix.Snapshot) bool) (time.Duration, error) {
	start := time.Now()
	tty := isTerminal(r.opts.out)
	for i := 0; ; i++ {
		if cond(r.diagnosis(), r.snapshot()) {
			fmt.Fprintf(r.opts.out, "\r    %s: %.0fs%s\n", what, time.Since(start).Seconds(), strings.Repeat(" ", 30))
			return time.Since(start), nil
		}
		if time.Since(start) > within {
			fmt.Fprintln(r.opts.out)
			return time.Since(start), fmt.Errorf("%s: not within %s", what, within)
		}
		// A terminal gets one line redrawn every second; a log or a
		// pipe a line every ten seconds.
		if tty {
			fmt.Fprintf(r.opts.out, "\r    waiting for %s: %.0fs / %.0fs", what, time.Since(start).Seconds(), within.Seconds())
		} else if i%10 == 0 {
			fmt.Fprintf(r.opts.out, "    waiting for %s: %.0fs / %.0fs\n", what, time.Since(start).Seconds(), within.Seconds())
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(r.opts.out)
			return time.Since(start), ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// close stops the matrix and the agents and removes the fabric.
func (r *fabricRun) close() error {
	var errs []error
	if r.stop != nil {
		r.stop()
		errs = append(errs, <-r.done)
	}
	for _, a := range r.agents {
		a.stop()
	}
	if r.dir != "" {
		os.RemoveAll(r.dir)
	}
	fmt.Fprintln(r.opts.out, "==> cleaning up")
	errs = append(errs, lab.Down(r.opts.spec.Prefix))
	return errors.Join(errs...)
}
