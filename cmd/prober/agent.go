package main

import (
	"context"
	"fmt"
	"io"
)

func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "prober agent: not implemented yet")
	return exitRuntime
}
