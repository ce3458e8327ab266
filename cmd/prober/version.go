package main

import (
	"context"
	"fmt"
	"io"

	"github.com/netprober/prober/buildinfo"
)

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "", stderr)
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prober version: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	fmt.Fprintf(stdout, "prober %s (%s, %s)\n", buildinfo.Version, buildinfo.Revision, buildinfo.GoVersion())
	return exitOK
}
