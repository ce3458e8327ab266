package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/netprober/prober/agent"
	"github.com/netprober/prober/config"
)

func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("agent", "--config FILE [--check] [--log-level LEVEL]", stderr)
	path := fs.String("config", "", "agent configuration file (YAML; see docs/agent.md)")
	check := fs.Bool("check", false, "validate the configuration and exit")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prober agent: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return exitUsage
	}
	if *path == "" {
		fmt.Fprintln(stderr, "prober agent: --config is required")
		fs.Usage()
		return exitUsage
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "prober agent: --log-level %q not one of debug, info, warn, error\n", *level)
		return exitUsage
	}
	cfg, err := config.LoadAgent(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if *check {
		fmt.Fprintf(stdout, "%s: ok (%d targets, protocols %v)\n", *path, len(cfg.Targets), cfg.Probing.Protocols)
		return exitOK
	}
	log := newLogger(cfg.Log, lvl, stderr)
	a, err := agent.New(cfg, log)
	if err != nil {
		log.Error("agent start", "err", err)
		return exitRuntime
	}
	if err := a.Run(ctx); err != nil {
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
