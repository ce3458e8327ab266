package testbed

import (
	"fmt"
	"runtime"

	"github.com/netprober/prober/ociimage"
)

// ImageSpec is a one-layer container image: static binaries and nothing
// else, like a distroless image, so a cluster can run the checkout's own
// prober without a registry or an image builder.
type ImageSpec struct {
	// Ref names the image, such as "prober.local/prober:dev"; containerd
	// imports it under this name.
	Ref string
	// Files are copied into the image's root, each at its Path with mode
	// 0755, owned by root.
	Files      []ImageFile
	Entrypoint []string
	Cmd        []string
}

// ImageFile is one file of an image: the host file From at Path.
type ImageFile struct{ From, Path string }

// WriteImage writes spec as an OCI image-layout tar archive to dst, the
// format `ctr images import` reads, for this machine's architecture
// (package ociimage, which `make image` builds prober's image with). The
// archive is deterministic: the same files give the same digests (no
// timestamps), so a node that already has the image keeps it. Its layer
// is uncompressed: the archive goes only into local containerds, which
// would spend seconds on gzip and as long undoing it.
func WriteImage(dst string, spec ImageSpec) error {
	if len(spec.Files) == 0 {
		return fmt.Errorf("image %s: no files", spec.Ref)
	}
	files := make([]ociimage.File, len(spec.Files))
	for i, f := range spec.Files {
		files[i] = ociimage.File{Path: f.Path, From: f.From, Mode: 0o755}
	}
	layer, err := ociimage.NewLayer(files, ociimage.Uncompressed)
	if err != nil {
		return fmt.Errorf("image %s: %w", spec.Ref, err)
	}
	platform := ociimage.Platform(runtime.GOARCH)
	img, err := ociimage.NewImage(ociimage.Config{
		Platform: platform, Entrypoint: spec.Entrypoint, Cmd: spec.Cmd,
		CreatedBy: "prober testbed: " + spec.Ref,
	}, layer)
	if err != nil {
		return fmt.Errorf("image %s: %w", spec.Ref, err)
	}
	return ociimage.WriteArchive(dst, spec.Ref, img, platform)
}
