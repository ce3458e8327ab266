package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

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
	if pct, ok := agentGCPercent(os.Getenv); ok {
		debug.SetGCPercent(pct)
	}
	log := newLogger(cfg.Log, cc.level, stderr)
	src, err := planSource(cfg, os.Getenv, log)
	if err != nil {
		log.Error("agent start", "err", err)
		return exitRuntime
	}
	rc, err := agent.ConfigFrom(cfg)
	if err != nil {
		log.Error("agent start", "err", err)
		return exitRuntime
	}
	a, err := agent.New(rc, log)
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

// agentGCPercent is the agent's GOGC, unless the environment sets one.
// Its live heap is small (about 10 MiB at a 5,000-node plan) beside the
// roots the collector counts with it (gopacket/layers' tables, 5 MiB;
// the goroutine stacks), so at the default of 100 its heap grew to
// about three times what it held: 50 keeps about 9 MiB of RSS off, for a
// collection about every 40 s at the 160 KB/s the agent allocates there
// (docs/performance.md, issue 14).
func agentGCPercent(getenv func(string) string) (int, bool) {
	if getenv("GOGC") != "" {
		return 0, false
	}
	return 50, true
}
