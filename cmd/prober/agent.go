package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/netprober/prober/agent"
	"github.com/netprober/prober/config"
)

func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cc, code := parseConfigCommand("agent", "docs/agent.md", args, stderr, nil)
	if code >= 0 {
		return code
	}
	cfg, err := config.LoadAgent(cc.path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if cc.check {
		fmt.Fprintf(stdout, "%s: ok (%d targets, protocols %v)\n", cc.path, len(cfg.Targets), cfg.Probing.Protocols)
		return exitOK
	}
	log := newLogger(cfg.Log, cc.level, stderr)
	src, err := planSource(cfg, os.Getenv)
	if err != nil {
		log.Error("agent start", "err", err)
		return exitRuntime
	}
	a, err := agent.New(cfg, log)
	if err != nil {
		log.Error("agent start", "err", err)
		return exitRuntime
	}
	if err := runAgentWith(ctx, a, src, log); err != nil {
		log.Error("agent", "err", err)
		return exitRuntime
	}
	return exitOK
}

func newLogger(format string, level slog.Level, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
