package main

import (
	"context"
	"fmt"
	"io"
)

// runTrace is a placeholder until its issue lands.
func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "prober trace: not implemented yet")
	return exitRuntime
}
