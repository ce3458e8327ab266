package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/netprober/prober/config"
	"github.com/netprober/prober/hub"
)

func runMatrix(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("matrix", "--config FILE [--check] [--log-level LEVEL]", stderr)
	path := fs.String("config", "", "matrix configuration file (YAML; see docs/matrix.md)")
	check := fs.Bool("check", false, "validate the configuration and exit")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prober matrix: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return exitUsage
	}
	if *path == "" {
		fmt.Fprintln(stderr, "prober matrix: --config is required")
		fs.Usage()
		return exitUsage
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "prober matrix: --log-level %q not one of debug, info, warn, error\n", *level)
		return exitUsage
	}
	cfg, err := config.LoadMatrix(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	if *check {
		fmt.Fprintf(stdout, "%s: ok (%d agents, groupBy %s)\n", *path, len(cfg.Agents), cfg.GroupBy)
		return exitOK
	}
	log := newLogger(cfg.Log, lvl, stderr)
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
