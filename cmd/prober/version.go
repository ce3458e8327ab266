package main

import (
	"context"
	"fmt"
	"io"

	"github.com/netprober/prober/buildinfo"
	"github.com/netprober/prober/cmd/internal/cli"
)

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("prober version", "", stderr)
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prober version: unexpected argument %q\n", fs.Arg(0))
		return cli.ExitUsage
	}
	fmt.Fprintf(stdout, "prober %s (%s, %s)\n", buildinfo.Version, buildinfo.Revision, buildinfo.GoVersion())
	return cli.ExitOK
}
