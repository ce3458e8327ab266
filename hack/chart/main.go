// Command chart packages prober's Helm chart for `make chart`, as `helm
// package` would, through Helm's own packages: charts/prober stamped
// with the build's version (the chart's SemVer version, and its
// appVersion, the image tag `make image` pushes) and ArtifactHub's
// annotations, written as bin/prober-VERSION.tgz, ready for `helm push
// bin/prober-VERSION.tgz oci://REGISTRY/charts`. It sends nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.Dir, "chart", "charts/prober", "the chart's `directory`")
	fs.StringVar(&o.Version, "version", "dev", "the build's version (git describe): the chart's version when it is SemVer, else a pre-release of the chart's own, and its appVersion")
	fs.StringVar(&o.Platforms, "platforms", "linux/amd64,linux/arm64", "the image's `platforms` (make image's), comma-separated, for ArtifactHub's images")
	fs.StringVar(&o.Out, "o", "bin", "the `directory` to write NAME-VERSION.tgz to")
	fs.StringVar(&o.ChangesFile, "changes", "", "a `file` of this version's changes, one a line, for ArtifactHub (none when empty)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "chart: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if err := ctx.Err(); err != nil {
		return 1
	}
	path, err := pack(o)
	if err != nil {
		fmt.Fprintf(stderr, "chart: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s\n", path)
	return 0
}
