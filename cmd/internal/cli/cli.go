// Package cli is what prober's commands share: exit codes, flag
// parsing, the logger. cmd/prober (every subcommand) and cmd/prober-agent
// (the agent alone, without the matrix's Kubernetes client) use it.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.
const (
	ExitOK      = 0
	ExitRuntime = 1
	ExitUsage   = 2
)

// NewLogger is a command's logger: JSON, or text when format says so.
func NewLogger(format string, level slog.Level, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// NewFlagSet returns a FlagSet for the command name (such as "prober
// trace") that reports errors and usage on stderr
// and never exits the process, so every command can return ExitUsage.
func NewFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// ParseFlags parses args and maps the outcome to an exit code: -1 means go
// on, ExitOK means -h was asked for, ExitUsage a bad flag.
func ParseFlags(fs *flag.FlagSet, args []string) int {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return -1
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	default:
		return ExitUsage
	}
}

// ParseInterspersed is ParseFlags for a command that takes arguments:
// flags may also follow them (`prober trace HOST --json`), as operators
// type them. The arguments are returned in order.
func ParseInterspersed(fs *flag.FlagSet, args []string) (positional []string, code int) {
	for {
		if code := ParseFlags(fs, args); code >= 0 {
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

// ConfigCommand is what the long-running subcommands (agent, matrix) take:
// a config file, --check, --log-level.
type ConfigCommand struct {
	Path  string
	Check bool
	Level slog.Level
}

// ParseConfigCommand parses a long-running subcommand's flags; code >= 0
// means exit with it. extra may add flags to fs before parsing.
func ParseConfigCommand(name, doc string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (c ConfigCommand, code int) {
	fs := NewFlagSet(name, "--config FILE [--check] [--log-level LEVEL]", stderr)
	path := fs.String("config", "", strings.TrimPrefix(name, "prober ")+" configuration file (YAML; see "+doc+")")
	check := fs.Bool("check", false, "validate the configuration and exit")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if extra != nil {
		extra(fs)
	}
	if code := ParseFlags(fs, args); code >= 0 {
		return c, code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		fs.Usage()
		return c, ExitUsage
	}
	if *path == "" {
		fmt.Fprintf(stderr, "%s: --config is required\n", name)
		fs.Usage()
		return c, ExitUsage
	}
	if err := c.Level.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "%s: --log-level %q not one of debug, info, warn, error\n", name, *level)
		return c, ExitUsage
	}
	c.Path, c.Check = *path, *check
	return c, -1
}
