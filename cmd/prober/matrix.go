package main

import (
	"context"
	"fmt"
	"io"

	"github.com/netprober/prober/config"
	"github.com/netprober/prober/hub"
)

func runMatrix(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cc, code := parseConfigCommand("matrix", "docs/matrix.md", args, stderr, nil)
	if code >= 0 {
		return code
	}
	cfg, err := config.LoadMatrix(cc.path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if cc.check {
		agents := fmt.Sprintf("%d agents", len(cfg.Agents))
		if cfg.KubernetesDiscovery() {
			agents = "agents from kubernetes discovery"
		}
		fmt.Fprintf(stdout, "%s: ok (%s, groupBy %s)\n", cc.path, agents, cfg.GroupBy)
		return exitOK
	}
	log := newLogger(cfg.Log, cc.level, stderr)
	d, rep, err := newMatrixDiscovery(cfg, log)
	if err != nil {
		log.Error("matrix start", "err", err)
		return exitRuntime
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
		return exitRuntime
	}
	if err := runMatrixWithDiscovery(ctx, h, d, rep, log); err != nil {
		log.Error("matrix", "err", err)
		return exitRuntime
	}
	return exitOK
}
