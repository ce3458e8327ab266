package ociimage

import (
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Epoch is every time an image records (its creation, its history, its
// files' mtimes), as reproducible builds (ko, SOURCE_DATE_EPOCH=0) do:
// a clock would change the digests of the same inputs.
var Epoch = time.Unix(0, 0).UTC()

// Config is what an image says about running it.
type Config struct {
	// Platform names the binaries' OS and architecture (and variant:
	// "v8" for arm64, as distroless and Docker's official images say).
	Platform   v1.Platform
	Entrypoint []string
	Cmd        []string
	// User is the process's user; "" runs as root.
	User   string
	Env    []string
	Labels map[string]string
	// CreatedBy is the history's line for each layer, such as the tool
	// that built it.
	CreatedBy string
}

// NewImage returns an OCI image (OCI media types, not Docker's) of
// layers, base first, for one platform.
func NewImage(cfg Config, layers ...v1.Layer) (v1.Image, error) {
	if cfg.Platform.OS == "" || cfg.Platform.Architecture == "" {
		return nil, fmt.Errorf("image: platform %q: needs an OS and an architecture", cfg.Platform.String())
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		adds[i] = mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: cfg.CreatedBy}}
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", cfg.Platform.String(), err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant, cf.OSVersion = cfg.Platform.OS, cfg.Platform.Architecture, cfg.Platform.Variant, cfg.Platform.OSVersion
	cf.Created = v1.Time{Time: Epoch}
	cf.Config.Entrypoint, cf.Config.Cmd = cfg.Entrypoint, cfg.Cmd
	cf.Config.User, cf.Config.Env, cf.Config.Labels = cfg.User, cfg.Env, cfg.Labels
	return mutate.ConfigFile(img, cf)
}

// NewIndex returns an OCI image index of images, each named in it by its
// config's platform, which is how a runtime picks its own.
func NewIndex(images ...v1.Image) (v1.ImageIndex, error) {
	adds := make([]mutate.IndexAddendum, len(images))
	for i, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		adds[i] = mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: cf.Platform()}}
	}
	return mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex), nil
}

// Platform is the image platform of a Linux Go binary built for goarch
// (GOARCH), with the variant distroless and Docker's official images give
// arm64 (containerd's matcher reads "" and "v8" alike).
func Platform(goarch string) v1.Platform {
	p := v1.Platform{OS: "linux", Architecture: goarch}
	if goarch == "arm64" {
		p.Variant = "v8"
	}
	return p
}
