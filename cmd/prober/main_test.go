package main

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/netprober/prober/cmd/internal/cli"
)

// TestMain lets tests run this test binary as the prober command itself:
// with PROBER_TEST_AS_MAIN=1 it is `prober` (the namespace tests start
// agents this way, so they exercise the real binary's code without a
// separate go build).
func TestMain(m *testing.M) {
	if os.Getenv("PROBER_TEST_AS_MAIN") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func runArgs(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func TestUsage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		args     []string
		code     int
		inStderr string
		inStdout string
	}{
		{"no args", nil, cli.ExitUsage, "usage: prober", ""},
		{"unknown subcommand", []string{"frobnicate"}, cli.ExitUsage, `unknown subcommand "frobnicate"`, ""},
		{"help", []string{"help"}, cli.ExitOK, "", "subcommands:"},
		{"agent unknown flag", []string{"agent", "--bogus"}, cli.ExitUsage, "flag provided but not defined: -bogus", ""},
		{"agent no config", []string{"agent"}, cli.ExitUsage, "--config is required", ""},
		{"agent missing file", []string{"agent", "--config", "/nonexistent/prober.yaml"}, cli.ExitUsage, "/nonexistent/prober.yaml", ""},
		{"agent bad log level", []string{"agent", "--config", "x", "--log-level", "loud"}, cli.ExitUsage, `--log-level "loud"`, ""},
		{"agent help", []string{"agent", "-h"}, cli.ExitOK, "--config", ""},
		{"version", []string{"version"}, cli.ExitOK, "", "prober "},
		{"version extra", []string{"version", "x"}, cli.ExitUsage, "unexpected argument", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runArgs(tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errOut)
			}
			if !strings.Contains(errOut, tc.inStderr) {
				t.Errorf("stderr %q lacks %q", errOut, tc.inStderr)
			}
			if !strings.Contains(out, tc.inStdout) {
				t.Errorf("stdout %q lacks %q", out, tc.inStdout)
			}
		})
	}
}

func TestAgentCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("name: n1\nclass: node\nlisten: 198.18.1.11:9808\ntargets: [{name: n2, address: 198.18.2.11, class: node}]\n"), 0o644)
	if code, out, errOut := runArgs("agent", "--config", good, "--check"); code != cli.ExitOK || !strings.Contains(out, "ok") {
		t.Errorf("good config: exit %d out %q err %q", code, out, errOut)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("name: n1\nclass: switch\nlisten: 198.18.1.11:9808\nprobing: {flows: 0.5, bogus: 1}\n"), 0o644)
	code, _, errOut := runArgs("agent", "--config", bad, "--check")
	if code != cli.ExitUsage {
		t.Errorf("bad config: exit %d, want %d", code, cli.ExitUsage)
	}
	for _, want := range []string{bad + ": probing.bogus", bad + ": probing.flows"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	}
}
