package ociimage

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations of index.json's entry that name an image on import.
const (
	// AnnotationRefName is the OCI image-layout's name of an entry.
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationContainerdName is the name containerd's import (ctr,
	// and Docker's containerd image store) gives an image first. Without
	// it, ctr 1.6 reads a full reference in AnnotationRefName as not its
	// --base-name and imports the image unnamed.
	AnnotationContainerdName = "io.containerd.image.name"
)

// WriteArchive writes img, a v1.Image or a v1.ImageIndex, as an OCI
// image-layout tar archive to dst, its one entry in index.json named ref
// (both annotations above). Beside index.json it writes a Docker
// manifest.json, which Docker's classic image store reads instead (it
// knows no index): it names ref's image for the platform docker, picked
// from an index (an image is its own). The archive is deterministic:
// files sorted, owned by root, mtime Epoch.
//
// ggcr writes the layout (package layout) into a directory beside dst,
// removed after; this function only puts that directory in a tar.
func WriteArchive(dst, ref string, img mutate.Appendable, docker v1.Platform) (err error) {
	if ref == "" || strings.ContainsAny(ref, " \t\n") {
		return fmt.Errorf("image %q: not a reference", ref)
	}
	named := mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
		Annotations: map[string]string{AnnotationRefName: ref, AnnotationContainerdName: ref},
	}}
	var dockerImg v1.Image
	switch x := img.(type) {
	case v1.Image:
		cf, err := x.ConfigFile()
		if err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
		named.Platform, dockerImg = cf.Platform(), x
	case v1.ImageIndex:
		if dockerImg, err = pick(x, docker); err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
	default:
		return fmt.Errorf("image %s: %T is neither an image nor an index", ref, img)
	}
	top := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, named), types.OCIImageIndex)

	dir, err := os.MkdirTemp(filepath.Dir(dst), ".oci-layout-*")
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	defer os.RemoveAll(dir)
	if _, err := layout.Write(dir, top); err != nil {
		return fmt.Errorf("image %s: layout: %w", ref, err)
	}
	mf, err := dockerManifest(ref, dockerImg)
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), mf, 0o644); err != nil {
		return err
	}

	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	if err := tarDir(out, dir); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	return nil
}

// pick returns idx's image for platform p (OS and architecture).
func pick(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == p.OS && d.Platform.Architecture == p.Architecture {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("no image for %s in the index (for docker's manifest.json)", p.String())
}

// dockerManifest is the manifest.json of `docker save`: one image, its
// config and layers as paths in the archive (the layout's blobs).
func dockerManifest(ref string, img v1.Image) ([]byte, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	entry := struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{Config: blob(m.Config.Digest), RepoTags: []string{ref}}
	for _, l := range m.Layers {
		entry.Layers = append(entry.Layers, blob(l.Digest))
	}
	return json.Marshal([]any{entry})
}

// tarDir writes dir's directories and regular files to w, sorted, as
// root with mtime Epoch: the layout's bytes, not the machine's.
func tarDir(w io.Writer, dir string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err == nil {
			names = append(names, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: name, Mode: 0o644, ModTime: Epoch, Typeflag: tar.TypeReg, Size: st.Size()}
		switch {
		case st.IsDir():
			h.Name, h.Mode, h.Typeflag, h.Size = name+"/", 0o755, tar.TypeDir, 0
		case !st.Mode().IsRegular():
			return fmt.Errorf("layout %s: not a regular file", name)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return err
			}
		}
	}
	return tw.Close()
}
