// Package agentcmd is the agent's command, shared by `prober agent` and
// the lean prober-agent binary: it links no Kubernetes client, which the
// agent does not use (docs/performance.md, issue 34).
package agentcmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/netprober/prober/agent"
	"github.com/netprober/prober/api"
	"github.com/netprober/prober/cmd/internal/cli"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/probe"
	"github.com/netprober/prober/tlsfiles"
)

// Run is the agent command, named name in its messages ("prober agent",
// "prober-agent"): it probes until ctx ends.
func Run(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	cc, code := cli.ParseConfigCommand(name, "docs/agent.md", args, stderr, nil)
	if code >= 0 {
		return code
	}
	cfg, err := config.LoadAgent(cc.Path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return cli.ExitUsage
	}
	if cc.Check {
		fmt.Fprintf(stdout, "%s: ok (%d targets, protocols %v)\n", cc.Path, len(cfg.Targets), cfg.Probing.Protocols)
		return cli.ExitOK
	}
	if pct, ok := gcPercent(os.Getenv); ok {
		debug.SetGCPercent(pct)
	}
	log := cli.NewLogger(cfg.Log, cc.Level, stderr)
	src, err := planSource(cfg, os.Getenv, log)
	if err != nil {
		log.Error("agent start", "err", err)
		return cli.ExitRuntime
	}
	rc, err := agent.ConfigFrom(cfg)
	if err != nil {
		log.Error("agent start", "err", err)
		return cli.ExitRuntime
	}
	a, err := agent.New(rc, log)
	if err != nil {
		log.Error("agent start", "err", err)
		return cli.ExitRuntime
	}
	if err := runAgentWith(ctx, a, src, log); err != nil {
		log.Error("agent", "err", err)
		return cli.ExitRuntime
	}
	return cli.ExitOK
}

// gcPercent is the agent's GOGC, unless the environment sets one.
// Its live heap is small (about 10 MiB at a 5,000-node plan) beside the
// roots the collector counts with it (gopacket/layers' tables, 5 MiB;
// the goroutine stacks), so at the default of 100 its heap grew to
// about three times what it held: 50 keeps about 9 MiB of RSS off, for a
// collection about every 40 s at the 160 KB/s the agent allocates there
// (docs/performance.md, issue 14).
func gcPercent(getenv func(string) string) (int, bool) {
	if getenv("GOGC") != "" {
		return 0, false
	}
	return 50, true
}

// planSource prepares an agent in a cluster: nil for static targets. It
// completes the agent's identity from the downward API: the name
// (NODE_NAME for a node agent, POD_NAME for a pod agent, so the two agents
// of a node stay apart in the matrix), the node label, and the source
// address (POD_IP, the node's IP under hostNetwork) when listen is
// unspecified; the targets come from the matrix's plan. The agent holds no
// API credentials and talks to no API server.
func planSource(cfg *config.Agent, getenv func(string) string, log *slog.Logger) (*agent.PlanSource, error) {
	if !cfg.KubernetesDiscovery() {
		return nil, nil
	}
	id, err := agent.IdentityFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("discovery: kubernetes: %w", err)
	}
	if cfg.Name == "" {
		cfg.Name = id.NodeName
		if cfg.Class == config.ClassPod {
			cfg.Name = id.PodName
		}
	}
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	if cfg.Labels[api.LabelNode] == "" {
		cfg.Labels[api.LabelNode] = id.NodeName
	}
	if cfg.Source == "" && cfg.SourceAddr().IsUnspecified() {
		srcs := make([]string, len(id.PodIPs))
		for i, a := range id.PodIPs {
			srcs[i] = a.String()
		}
		cfg.Source = strings.Join(srcs, ",") // dual-stack: one per family
	}
	k := cfg.Kubernetes
	// Node agents ping the API server over TLS through its VIPs, as their
	// node's kubelet does (seed 001): the CA must be readable now.
	if cfg.Class == config.ClassNode && slices.Contains(cfg.Probing.Protocols, probe.ProtocolHTTP2Ping) {
		if err := k.CheckAPIServerCA(); err != nil {
			return nil, err
		}
	}
	src := &agent.PlanSource{URL: k.MatrixURL(getenv), APIServerCAFile: k.APIServerCA(), Labels: cfg.Labels, TokenFile: k.TokenFile}
	if k.MatrixCAFile != "" {
		roots, err := tlsfiles.NewRoots(k.MatrixCAFile, func(err error) {
			log.Error("kubernetes.matrixCAFile changed and does not load; the last good CAs verify the matrix", "err", err)
		})
		if err != nil {
			return nil, fmt.Errorf("kubernetes.matrixCAFile: %w", err)
		}
		src.TLS = roots.Config(k.MatrixServerName())
	}
	return src, nil
}

// runAgentWith probes until ctx ends, following the matrix's plan when
// src is set.
func runAgentWith(ctx context.Context, a *agent.Agent, src *agent.PlanSource, log *slog.Logger) error {
	if src == nil {
		return a.Run(ctx)
	}
	log.Info("following the matrix's plan", "matrix", src.URL)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.Run(gctx) })
	g.Go(func() error { return a.Follow(gctx, *src) })
	return g.Wait()
}
