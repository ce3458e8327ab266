package testbed

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
)

// StartFabric builds the fabric, starts a node-class agent on every node
// and a pod-class agent in every pod (like the two DaemonSets), waits
// until each serves, and starts the matrix in this process. On error
// everything started is stopped and removed.
func StartFabric(ctx context.Context, s FabricSpec) (r *Fabric, err error) {
	if s.Out == nil {
		s.Out = io.Discard
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if err := s.checkFamilies(); err != nil {
		return nil, err
	}
	r = &Fabric{spec: s}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.Close())
			r = nil
		}
	}()
	step := func(format string, args ...any) { fmt.Fprintf(s.Out, "==> "+format+"\n", args...) }
	ls := s.Lab
	step("building the fabric: %s, %d pod(s) per node, LB %v, probes over %s (namespaces %s-*)",
		ls.Shape(), max(ls.PodsPerNode, 0), ls.LB, strings.Join(s.families(), "+"), ls.Prefix)
	if err := lab.Down(ls.Prefix); err != nil {
		return r, fmt.Errorf("removing an earlier lab: %w", err)
	}
	if r.fab, err = lab.Up(ctx, ls, s.Logger); err != nil {
		return r, err
	}
	if r.dir, err = os.MkdirTemp("", "prober-lab-"); err != nil {
		return r, err
	}
	var urls []string
	for _, h := range r.fab.Hosts {
		a, err := StartAgent(ctx, r.fab, AgentSpec{Prober: s.Prober, Config: r.agentConfig(h), Dir: r.dir})
		if err != nil {
			return r, err
		}
		r.agents = append(r.agents, a)
		urls = append(urls, a.URL())
	}
	step("started %d agents: a node-class agent on every node, a pod-class agent in every pod", len(r.agents))
	for _, a := range r.agents {
		if err := a.WaitHealthy(ctx, 15*time.Second); err != nil {
			return r, err
		}
	}
	r.healthy = time.Now()

	mcfg := &config.Matrix{Listen: s.Listen, Agents: urls, GroupBy: "node", Hops: r.fab.Hops(),
		Interval: config.Duration(2 * time.Second), Window: config.Duration(s.Window)}
	mcfg.SetDefaults()
	if err := mcfg.Validate(); err != nil {
		return r, fmt.Errorf("matrix config: %w", err)
	}
	// The matrix runs in this process, in this process's namespace, so
	// its page is reachable on loopback; its pulls dial from inside the
	// first node's namespace, from where every agent is routed.
	transport := lab.HTTPClient(r.fab.Nodes()[0].Namespace, mcfg.Timeout.D()).Transport
	if r.hub, err = hub.New(mcfg, s.Logger, hub.Options{Transport: transport}); err != nil {
		return r, err
	}
	hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stop, r.done = stop, make(chan error, 1)
	go func() { r.done <- r.hub.Run(hctx) }()
	step("matrix running: %s", r.MatrixURL())
	return r, nil
}
