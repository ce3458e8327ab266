package main

import (
	"context"
	"fmt"
	"io"
)

// runMatrix is a placeholder until its issue lands.
func runMatrix(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "prober matrix: not implemented yet")
	return exitRuntime
}
