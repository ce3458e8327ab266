package testbed

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestWriteImage reads WriteImage's archive as containerd's import does:
// index.json's entry named by the annotations ctr reads, the manifest,
// config and layer blobs it points to, and the files in the layer at
// their paths with mode 0755. Two writes of the same files are the same
// bytes.
func TestWriteImage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"a": "#!/bin/true\n", "b": "bbbb"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const ref = "prober.local/prober:test"
	spec := ImageSpec{
		Ref: ref,
		Files: []ImageFile{
			{From: filepath.Join(dir, "a"), Path: "/prober"},
			{From: filepath.Join(dir, "b"), Path: "/usr/bin/b"},
		},
		Entrypoint: []string{"/prober"}, Cmd: []string{"agent"},
	}
	var archives [2][]byte
	for i := range archives {
		p := filepath.Join(dir, "image.tar")
		if err := WriteImage(p, spec); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		archives[i] = b
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("two writes of the same image differ")
	}
	blobs := untar(t, archives[0])
	var layout struct{ ImageLayoutVersion string }
	if decode(t, blobs, "oci-layout", &layout); layout.ImageLayoutVersion != "1.0.0" {
		t.Errorf("oci-layout says version %q, want 1.0.0", layout.ImageLayoutVersion)
	}

	type desc struct {
		MediaType   string
		Digest      string
		Annotations map[string]string
		Platform    struct{ OS, Architecture string }
	}
	var index struct{ Manifests []desc }
	decode(t, blobs, "index.json", &index)
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want 1", len(index.Manifests))
	}
	m := index.Manifests[0]
	for _, k := range []string{"io.containerd.image.name", "org.opencontainers.image.ref.name"} {
		if got := m.Annotations[k]; got != ref {
			t.Errorf("index.json annotation %s = %q, want %q", k, got, ref)
		}
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("index.json's entry is a %s, want an OCI manifest", m.MediaType)
	}
	if m.Platform.OS != "linux" || m.Platform.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", m.Platform.OS, m.Platform.Architecture, runtime.GOARCH)
	}

	var manifest struct {
		Config desc
		Layers []desc
	}
	decode(t, blobs, blobPath(m.Digest), &manifest)
	var config struct {
		OS, Architecture string
		Config           struct{ Entrypoint, Cmd []string }
		RootFS           struct {
			DiffIDs []string `json:"diff_ids"`
		}
	}
	decode(t, blobs, blobPath(manifest.Config.Digest), &config)
	if config.OS != "linux" || config.Architecture != runtime.GOARCH {
		t.Errorf("config platform %s/%s, want linux/%s", config.OS, config.Architecture, runtime.GOARCH)
	}
	if !slices.Equal(config.Config.Entrypoint, spec.Entrypoint) || !slices.Equal(config.Config.Cmd, spec.Cmd) {
		t.Errorf("config entrypoint %q cmd %q, want %q %q", config.Config.Entrypoint, config.Config.Cmd, spec.Entrypoint, spec.Cmd)
	}
	if len(manifest.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(manifest.Layers))
	}
	l := manifest.Layers[0]
	if l.MediaType != "application/vnd.oci.image.layer.v1.tar" {
		t.Errorf("layer media type %s, want an uncompressed OCI layer", l.MediaType)
	}
	if !slices.Equal(config.RootFS.DiffIDs, []string{l.Digest}) {
		t.Errorf("diff IDs %q, want the uncompressed layer's digest %s", config.RootFS.DiffIDs, l.Digest)
	}

	type entry struct {
		mode int64
		body string
	}
	got := map[string]entry{}
	tr := tar.NewReader(bytes.NewReader(blobs[blobPath(l.Digest)]))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if h.Uid != 0 || h.Gid != 0 || h.ModTime.Unix() != 0 {
			t.Errorf("%s: owner %d:%d mtime %v, want root and the epoch", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		got[h.Name] = entry{h.Mode, string(b)}
	}
	want := map[string]entry{
		"prober":    {0o755, "#!/bin/true\n"},
		"usr/":      {0o755, ""},
		"usr/bin/":  {0o755, ""},
		"usr/bin/b": {0o755, "bbbb"},
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("layer %s = %+v (present %v), want %+v", name, g, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("layer holds %d entries, want %d: %v", len(got), len(want), got)
	}
}

func TestWriteImageBadSpec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("f"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec ImageSpec
		want string
	}{
		{"no ref", ImageSpec{Files: []ImageFile{{From: f, Path: "/x"}}}, "not a reference"},
		{"no files", ImageSpec{Ref: "x:y"}, "no files"},
		{"not regular", ImageSpec{Ref: "x:y", Files: []ImageFile{{From: dir, Path: "/x"}}}, "not a regular file"},
		{"root path", ImageSpec{Ref: "x:y", Files: []ImageFile{{From: f, Path: "/"}}}, "not a path in the image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteImage(filepath.Join(dir, "image.tar"), tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("WriteImage: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func untar(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			files[h.Name], _ = io.ReadAll(tr)
		}
	}
}

func decode(t *testing.T, files map[string][]byte, name string, v any) {
	t.Helper()
	b, ok := files[name]
	if !ok {
		t.Fatalf("archive has no %s", name)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func blobPath(digest string) string { return "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:") }
