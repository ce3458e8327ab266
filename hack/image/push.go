package main

import (
	"context"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pushIndex pushes idx, both platforms' images and their blobs, to ref,
// with the credentials docker login and the registries' helpers keep
// (authn.DefaultKeychain: ~/.docker/config.json, $DOCKER_CONFIG).
func pushIndex(ctx context.Context, ref string, idx v1.ImageIndex, log io.Writer) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("push %s: %w", r, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "pushed %s@%s\n", r, d)
	return nil
}
