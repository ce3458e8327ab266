//go:build !linux

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/netprober/prober/cmd/internal/cli"
)

// runLabCluster needs Linux: the cluster's nodes are network namespaces.
func runLabCluster(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "prober lab cluster: needs Linux (the nodes are network namespaces) and root")
	return cli.ExitRuntime
}
