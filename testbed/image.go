package testbed

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"runtime"
	"strings"
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

// OCI media types and annotations (image-spec v1.1).
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
	annRefName    = "org.opencontainers.image.ref.name"
	// containerd's import names an image by this annotation first.
	annContainerdName = "io.containerd.image.name"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// WriteImage writes spec as an OCI image-layout tar archive to dst, the
// format `ctr images import` reads. The archive is deterministic: the same
// files give the same digests (no timestamps), so a node that already has
// the image keeps it.
func WriteImage(dst string, spec ImageSpec) (err error) {
	if spec.Ref == "" || strings.ContainsAny(spec.Ref, " \t\n") {
		return fmt.Errorf("image %q: not a reference", spec.Ref)
	}
	if len(spec.Files) == 0 {
		return fmt.Errorf("image %s: no files", spec.Ref)
	}
	layer, err := os.CreateTemp(path.Dir(dst), ".layer-*")
	if err != nil {
		return fmt.Errorf("image %s: %w", spec.Ref, err)
	}
	defer func() {
		layer.Close()
		os.Remove(layer.Name())
	}()
	sum := sha256.New()
	if err := writeLayer(io.MultiWriter(layer, sum), spec.Files); err != nil {
		return fmt.Errorf("image %s: %w", spec.Ref, err)
	}
	size, err := layer.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	layerDesc := descriptor{MediaType: mediaLayer, Digest: digest(sum), Size: size}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": spec.Entrypoint, "Cmd": spec.Cmd},
		// An uncompressed layer's diff ID is its own digest.
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{layerDesc.Digest}},
		"history": []map[string]string{{"created_by": "prober testbed: " + spec.Ref}},
	})
	if err != nil {
		return err
	}
	configDesc := blobDesc(mediaConfig, config)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaManifest,
		"config": configDesc, "layers": []descriptor{layerDesc},
	})
	if err != nil {
		return err
	}
	manifestDesc := blobDesc(mediaManifest, manifest)
	manifestDesc.Annotations = map[string]string{annRefName: spec.Ref, annContainerdName: spec.Ref}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{manifestDesc}})
	if err != nil {
		return err
	}

	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("image %s: %w", spec.Ref, err)
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	tw := tar.NewWriter(out)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "blobs/sha256/", Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: blobPath(layerDesc), Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := layer.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(tw, layer); err != nil {
		return err
	}
	for _, b := range []struct {
		d descriptor
		b []byte
	}{{configDesc, config}, {manifestDesc, manifest}} {
		if err := add(blobPath(b.d), b.b); err != nil {
			return err
		}
	}
	if err := add("index.json", index); err != nil {
		return err
	}
	return tw.Close()
}

// writeLayer writes the files as a tar layer, with their parent
// directories first.
func writeLayer(w io.Writer, files []ImageFile) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	for _, f := range files {
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if p == "" || p == "." {
			return fmt.Errorf("file %q: not a path in the image", f.Path)
		}
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
				return err
			}
		}
		in, err := os.Open(f.From)
		if err != nil {
			return err
		}
		st, err := in.Stat()
		if err == nil && !st.Mode().IsRegular() {
			err = errors.New("not a regular file")
		}
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Name: p, Mode: 0o755, Size: st.Size(), Typeflag: tar.TypeReg})
		}
		if err == nil {
			_, err = io.Copy(tw, in)
		}
		in.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f.From, err)
		}
	}
	return tw.Close()
}

func digest(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

func blobDesc(mediaType string, b []byte) descriptor {
	h := sha256.New()
	h.Write(b)
	return descriptor{MediaType: mediaType, Digest: digest(h), Size: int64(len(b))}
}

func blobPath(d descriptor) string { return "blobs/sha256/" + strings.TrimPrefix(d.Digest, "sha256:") }
