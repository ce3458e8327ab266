// Command image builds prober's container image with no Docker, for
// `make image`: static binaries for linux/amd64 and linux/arm64, an OCI
// index of the two images (package ociimage) written as an OCI
// image-layout archive (bin/prober.oci.tar), an SPDX SBOM of the Go
// modules beside it (bin/prober.spdx.json), with -krew the same binaries
// as the kubectl plugin's archives and krew manifest, and with -push the
// index pushed to its registry (the only step that uses the network).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var arches string
	fs.StringVar(&o.Ref, "ref", "ghcr.io/netprober/prober:dev", "the image's `reference`: its name in the archive, and where -push pushes")
	fs.StringVar(&o.Pkg, "pkg", "./cmd/prober", "the Go `package` to build, the image's /"+binName)
	fs.StringVar(&o.AgentPkg, "agent-pkg", "./cmd/prober-agent", "the agent's Go `package`, the image's /"+agentName)
	fs.StringVar(&arches, "arch", "amd64,arm64", "the `GOARCH`es to build, comma-separated: one image each")
	fs.StringVar(&o.LDFlags, "ldflags", "-s -w", "go build's -ldflags (the Makefile's, with the version stamped)")
	fs.StringVar(&o.Version, "version", "dev", "the version, for the image's labels and the SBOM")
	fs.StringVar(&o.Revision, "revision", "unknown", "the source revision, for the image's labels")
	fs.StringVar(&o.BinDir, "bin", "bin", "the `directory` of the binaries, bin/linux-ARCH/prober")
	fs.StringVar(&o.Archive, "o", "bin/prober.oci.tar", "the OCI image-layout archive to write")
	fs.StringVar(&o.SBOM, "sbom", "bin/prober.spdx.json", "the SPDX JSON SBOM to write")
	fs.StringVar(&o.DockerArch, "docker-arch", runtime.GOARCH, "the `GOARCH` whose image the archive's manifest.json names, for docker load's classic store")
	fs.StringVar(&o.Krew, "krew", "", "a `directory` to write the kubectl plugin's archives (kubectl-prober_linux_ARCH.tar.gz) and krew manifest (prober.yaml) to; none when empty")
	fs.StringVar(&o.KrewURL, "krew-url", "", "where the release publishes the plugin's archives, for the krew manifest (default: the GitHub release of -version)")
	push := fs.Bool("push", false, "push the index to -ref's registry (credentials as docker's: ~/.docker/config.json)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "image: unexpected arguments %q\n", fs.Args())
		return 2
	}
	o.Arches = strings.Split(arches, ",")
	if o.KrewURL == "" {
		o.KrewURL = "https://github.com/netprober/prober/releases/download/" + o.Version
	}
	idx, err := build(ctx, o, stdout)
	if err == nil && *push {
		err = pushIndex(ctx, o.Ref, idx, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "image: %v\n", err)
		return 1
	}
	return 0
}
