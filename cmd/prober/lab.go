package main

import (
	"context"
	"fmt"
	"io"
)

// runLab is a placeholder until its issue lands.
func runLab(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "prober lab: not implemented yet")
	return exitRuntime
}
