package main

import (
	"context"
	"fmt"
	"io"

	"github.com/netprober/prober/cmd/internal/cli"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/hub"
)

func runMatrix(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cc, code := cli.ParseConfigCommand("prober matrix", "docs/matrix.md", args, stderr, nil)
	if code >= 0 {
		return code
	}
	cfg, err := config.LoadMatrix(cc.Path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return cli.ExitUsage
	}
	if cc.Check {
		agents := fmt.Sprintf("%d agents", len(cfg.Agents))
		if cfg.KubernetesDiscovery() {
			agents = "agents from kubernetes discovery"
		}
		fmt.Fprintf(stdout, "%s: ok (%s, groupBy %s)\n", cc.Path, agents, cfg.GroupBy)
		return cli.ExitOK
	}
	log := cli.NewLogger(cfg.Log, cc.Level, stderr)
	d, rep, err := newMatrixDiscovery(cfg, log)
	if err != nil {
		log.Error("matrix start", "err", err)
		return cli.ExitRuntime
	}
	var opts hub.Options
	if d != nil {
		opts.SigningKeys = d.SigningKeys
	}
	if rep != nil {
		opts.Diagnosed, opts.KubeWrites = rep.Observe, rep.Writes
	}
	h, err := hub.New(cfg, log, opts)
	if err != nil {
		log.Error("matrix start", "err", err)
		return cli.ExitRuntime
	}
	if err := runMatrixWithDiscovery(ctx, h, d, rep, log); err != nil {
		log.Error("matrix", "err", err)
		return cli.ExitRuntime
	}
	return cli.ExitOK
}
