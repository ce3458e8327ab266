// Command prober finds the switch, link or load balancer that drops a
// Kubernetes cluster's packets. See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/netprober/prober/cmd/internal/agentcmd"
	"github.com/netprober/prober/cmd/internal/cli"
)

type subcommand struct {
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	summary string
}

var subcommands = map[string]subcommand{
	"agent":   {runAgent, "run the per-node probing agent"},
	"matrix":  {runMatrix, "aggregate agents into a loss matrix and localize faults"},
	"trace":   {runTrace, "multipath TCP-SYN traceroute to a host"},
	"kubectl": {runKubectl, "the kubectl plugin (kubectl prober): status, who, trace, page"},
	"lab":     {runLab, "build a data-center fabric in network namespaces (root)"},
	"version": {runVersion, "print the version"},
}

var order = []string{"agent", "matrix", "trace", "kubectl", "lab", "version"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	args := os.Args[1:]
	// kubectl runs its plugins by name: bin/kubectl-prober is prober.
	if strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe") == pluginName {
		args = append([]string{"kubectl"}, args...)
	}
	code := run(ctx, args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return cli.ExitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return cli.ExitOK
	}
	sc, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "prober: unknown subcommand %q\n\n", args[0])
		usage(stderr)
		return cli.ExitUsage
	}
	return sc.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: prober <subcommand> [flags]\n\nsubcommands:")
	for _, name := range order {
		fmt.Fprintf(w, "  %-8s %s\n", name, subcommands[name].summary)
	}
	fmt.Fprintln(w, "\nRun 'prober <subcommand> -h' for its flags.")
}

// runAgent is `prober agent`; the lean prober-agent binary runs the same.
func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return agentcmd.Run(ctx, "prober agent", args, stdout, stderr)
}
