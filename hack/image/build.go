package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/netprober/prober/ociimage"
)

// binName is the binary's name in the image and in BinDir; agentName the
// agent's own, without the Kubernetes client (cmd/prober-agent), which
// the DaemonSets run.
const (
	binName   = "prober"
	agentName = "prober-agent"
)

// options say what build builds; run fills them from flags.
type options struct {
	Ref, Pkg, AgentPkg string
	Arches             []string
	LDFlags            string
	Version, Revision  string
	BinDir             string
	Archive, SBOM      string
	DockerArch         string
	// Krew, when set, is the directory for the kubectl plugin's archives
	// and krew manifest (writeKrew), their URLs under KrewURL.
	Krew, KrewURL string
}

// The Dockerfile's ENTRYPOINT and CMD.
var (
	entrypoint = []string{"/" + binName}
	cmd        = []string{"agent", "--config", "/etc/prober/agent.yaml"}
)

// build cross-builds the binaries, and writes the archive and the SBOM;
// it returns the index for a push.
func build(ctx context.Context, o options, log io.Writer) (v1.ImageIndex, error) {
	base, err := ociimage.NewLayer(ociimage.BaseFiles(), ociimage.Gzip)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	var images []v1.Image
	var infos []*debug.BuildInfo
	bins := map[string]string{}
	for _, arch := range o.Arches {
		var files []ociimage.File
		for _, b := range []struct{ name, pkg string }{{binName, o.Pkg}, {agentName, o.AgentPkg}} {
			bin := filepath.Join(o.BinDir, "linux-"+arch, b.name)
			if err := goBuild(ctx, o, b.pkg, arch, bin); err != nil {
				return nil, err
			}
			bi, err := buildinfo.ReadFile(bin)
			if err != nil {
				return nil, fmt.Errorf("%s: build info: %w", bin, err)
			}
			infos = append(infos, bi)
			files = append(files, ociimage.File{Path: "/" + b.name, From: bin, Mode: 0o755})
		}
		bins[arch] = files[0].From
		layer, err := ociimage.NewLayer(files, ociimage.Gzip)
		if err != nil {
			return nil, fmt.Errorf("linux/%s: %w", arch, err)
		}
		img, err := ociimage.NewImage(ociimage.Config{
			Platform:   ociimage.Platform(arch),
			Entrypoint: entrypoint, Cmd: cmd,
			// UID 0 on purpose, as the Dockerfile says: Kubernetes grants
			// an added capability (NET_RAW, for the raw sockets) only to
			// a root process; the manifests drop every other capability
			// and make the root filesystem read-only.
			User: "0",
			Env:  []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Labels: map[string]string{
				"org.opencontainers.image.title":    "prober",
				"org.opencontainers.image.source":   "https://github.com/netprober/prober",
				"org.opencontainers.image.version":  o.Version,
				"org.opencontainers.image.revision": o.Revision,
			},
			CreatedBy: "hack/image " + o.Pkg,
		}, base, layer)
		if err != nil {
			return nil, err
		}
		images = append(images, img)
	}
	idx, err := ociimage.NewIndex(images...)
	if err != nil {
		return nil, err
	}
	if err := ociimage.WriteArchive(o.Archive, o.Ref, idx, ociimage.Platform(o.DockerArch)); err != nil {
		return nil, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "%s: %s@%s\n", o.Archive, o.Ref, digest)
	doc, err := ociimage.NewSBOM(ociimage.SBOM{
		Name:      o.Ref,
		Namespace: "https://github.com/netprober/prober/spdx/" + digest.Hex,
		Version:   o.Version, Binaries: infos, Tool: "prober-hack-image",
	})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := ociimage.WriteSBOM(&buf, doc); err != nil {
		return nil, err
	}
	if err := os.WriteFile(o.SBOM, buf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "%s: %d packages\n", o.SBOM, len(doc.Packages))
	if o.Krew != "" {
		if err := writeKrew(o, bins, log); err != nil {
			return nil, err
		}
	}
	return idx, nil
}

// goBuild builds pkg for linux/arch to bin as the Dockerfile and the
// Makefile's build do: static (no cgo), no paths of this machine, with
// $GO (the Makefile's) or else the go on PATH.
func goBuild(ctx context.Context, o options, pkg, arch, bin string) error {
	goCmd := os.Getenv("GO") // the Makefile's $(GO)
	if goCmd == "" {
		goCmd = "go"
	}
	c := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-ldflags", o.LDFlags, "-o", bin, pkg)
	c.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for linux/%s: %w\n%s", pkg, arch, err, out)
	}
	return nil
}
