// Command prober-agent is `prober agent` alone: the same flags, config and
// behaviour, in a binary that links no Kubernetes client, so the agent on
// every node maps and initializes only what it runs (docs/performance.md,
// issue 34). The container image carries both; cmd/prober stays the
// operator's entry point.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/netprober/prober/cmd/internal/agentcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := agentcmd.Run(ctx, "prober-agent", os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
