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
		fmt.Fprintf(stdout, "%s: ok (%d agents, groupBy %s)\n", cc.path, len(cfg.Agents), cfg.GroupBy)
		return exitOK
	}
	log := newLogger(cfg.Log, cc.level, stderr)
	h, err := hub.New(cfg, log, hub.Options{})
	if err != nil {
		log.Error("matrix start", "err", err)
		return exitRuntime
	}
	if err := h.Run(ctx); err != nil {
		log.Error("matrix", "err", err)
		return exitRuntime
	}
	return exitOK
}
