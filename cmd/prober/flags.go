package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// newFlagSet returns a FlagSet that reports errors and usage on stderr and
// never exits the process, so every subcommand can return exitUsage.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("prober "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: prober %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and maps the outcome to an exit code: -1 means go
// on, exitOK means -h was asked for, exitUsage a bad flag.
func parseFlags(fs *flag.FlagSet, args []string) int {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return -1
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	default:
		return exitUsage
	}
}

// parseInterspersed is parseFlags for a command that takes arguments:
// flags may also follow them (`prober trace HOST --json`), as operators
// type them. The arguments are returned in order.
func parseInterspersed(fs *flag.FlagSet, args []string) (positional []string, code int) {
	for {
		if code := parseFlags(fs, args); code >= 0 {
			return nil, code
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, -1
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// configCommand is what the long-running subcommands (agent, matrix) take:
// a config file, --check, --log-level.
type configCommand struct {
	path  string
	check bool
	level slog.Level
}

// parseConfigCommand parses a long-running subcommand's flags; code >= 0
// means exit with it. extra may add flags to fs before parsing.
func parseConfigCommand(name, doc string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (c configCommand, code int) {
	fs := newFlagSet(name, "--config FILE [--check] [--log-level LEVEL]", stderr)
	path := fs.String("config", "", name+" configuration file (YAML; see "+doc+")")
	check := fs.Bool("check", false, "validate the configuration and exit")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if extra != nil {
		extra(fs)
	}
	if code := parseFlags(fs, args); code >= 0 {
		return c, code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prober %s: unexpected argument %q\n", name, fs.Arg(0))
		fs.Usage()
		return c, exitUsage
	}
	if *path == "" {
		fmt.Fprintf(stderr, "prober %s: --config is required\n", name)
		fs.Usage()
		return c, exitUsage
	}
	if err := c.level.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "prober %s: --log-level %q not one of debug, info, warn, error\n", name, *level)
		return c, exitUsage
	}
	c.path, c.check = *path, *check
	return c, -1
}
