package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	spdxjson "github.com/spdx/tools-golang/json"
	"sigs.k8s.io/yaml"

	"github.com/netprober/prober/ociimage"
)

// TestImageTwoPlatforms builds the image of a small program for amd64
// and arm64 as `make image` builds prober's, twice, and reads the archive
// back with ggcr's layout reader: both platforms in the index, each
// config naming its own, each layer's binary an ELF of that machine, the
// Dockerfile's entrypoint; the same digests and bytes both times.
func TestImageTwoPlatforms(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-builds a program twice: not in -short")
	}
	const ref = "prober.local/hello:test"
	var archives [2][]byte
	var digests [2]v1.Hash
	var manifests [2][]byte
	var krewDir string
	for i := range archives {
		dir := t.TempDir()
		o := options{
			Ref: ref, Pkg: "./testdata/hello", AgentPkg: "./testdata/hello", Arches: []string{"amd64", "arm64"},
			LDFlags: "-s -w", Version: "v0.0.0-test", Revision: "abc",
			BinDir: dir, Archive: filepath.Join(dir, "image.oci.tar"), SBOM: filepath.Join(dir, "sbom.json"),
			DockerArch: "arm64", Krew: filepath.Join(dir, "krew"), KrewURL: "https://example.com/rel/",
		}
		var log bytes.Buffer
		idx, err := build(context.Background(), o, &log)
		if err != nil {
			t.Fatal(err)
		}
		if digests[i], err = idx.Digest(); err != nil {
			t.Fatal(err)
		}
		if archives[i], err = os.ReadFile(o.Archive); err != nil {
			t.Fatal(err)
		}
		if manifests[i], err = os.ReadFile(filepath.Join(o.Krew, "prober.yaml")); err != nil {
			t.Fatal(err)
		}
		krewDir = o.Krew
		sb, err := os.Open(o.SBOM)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := spdxjson.Read(sb)
		sb.Close()
		if err != nil {
			t.Fatalf("sbom: %v", err)
		}
		if doc.Packages[0].PackageName != "github.com/netprober/prober" || doc.Packages[0].PackageVersion != "v0.0.0-test" {
			t.Errorf("sbom describes %s %s, want the main module at -version", doc.Packages[0].PackageName, doc.Packages[0].PackageVersion)
		}
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds: index digests %s and %s", digests[0], digests[1])
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("two builds: the archives differ")
	}
	if !bytes.Equal(manifests[0], manifests[1]) {
		t.Error("two builds: the krew manifests differ")
	}
	checkKrew(t, krewDir, manifests[1])

	dir := t.TempDir()
	extract(t, archives[0], dir)
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 {
		t.Fatalf("index.json: %d entries, want 1", len(tm.Manifests))
	}
	for _, k := range []string{ociimage.AnnotationContainerdName, ociimage.AnnotationRefName} {
		if got := tm.Manifests[0].Annotations[k]; got != ref {
			t.Errorf("index.json annotation %s = %q, want %q", k, got, ref)
		}
	}
	if tm.Manifests[0].Digest != digests[0] {
		t.Errorf("index.json names %s, want the built index %s", tm.Manifests[0].Digest, digests[0])
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	// Every blob's digest, size and diff ID as its manifest says.
	if err := validate.Index(idx); err != nil {
		t.Errorf("validate: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	configs := map[string]v1.Hash{}
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("index entry %s names no platform", d.Digest)
		}
		arch := d.Platform.Architecture
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != "linux" || cf.Architecture != arch || d.Platform.OS != "linux" {
			t.Errorf("entry %s/%s: config names %s/%s", d.Platform.OS, arch, cf.OS, cf.Architecture)
		}
		if !slices.Equal(cf.Config.Entrypoint, []string{"/prober"}) || !slices.Equal(cf.Config.Cmd, []string{"agent", "--config", "/etc/prober/agent.yaml"}) {
			t.Errorf("%s: entrypoint %q cmd %q, want the Dockerfile's", arch, cf.Config.Entrypoint, cf.Config.Cmd)
		}
		if cf.Config.User != "0" {
			t.Errorf("%s: user %q, want 0", arch, cf.Config.User)
		}
		if cf.Created.Unix() != 0 {
			t.Errorf("%s: created %v, want the epoch", arch, cf.Created)
		}
		if configs[arch], err = img.ConfigName(); err != nil {
			t.Fatal(err)
		}
		files := imageFiles(t, img)
		if _, ok := files["etc/passwd"]; !ok {
			t.Errorf("%s: no /etc/passwd from the base", arch)
		}
		for _, name := range []string{"prober", "prober-agent"} {
			bin, ok := files[name]
			if !ok {
				t.Fatalf("%s: no /%s", arch, name)
			}
			f, err := elf.NewFile(bytes.NewReader(bin))
			if err != nil {
				t.Fatalf("%s: /%s: %v", arch, name, err)
			}
			if want, ok := machines[arch]; !ok || f.Machine != want {
				t.Errorf("%s: /%s is an ELF for %v, want %v", arch, name, f.Machine, want)
			}
		}
		delete(machines, arch)
	}
	if len(machines) != 0 || len(im.Manifests) != 2 {
		t.Errorf("index has %d images; missing %v", len(im.Manifests), machines)
	}

	// Docker's classic store reads manifest.json: -docker-arch's image.
	var mf []struct {
		Config   string
		RepoTags []string
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err == nil {
		err = json.Unmarshal(b, &mf)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(mf) != 1 || mf[0].Config != "blobs/sha256/"+configs["arm64"].Hex || !slices.Equal(mf[0].RepoTags, []string{ref}) {
		t.Errorf("manifest.json = %+v, want the arm64 config %s tagged %s", mf, configs["arm64"], ref)
	}
}

// imageFiles reads every regular file of img's layers (no whiteouts
// here), by path without the leading slash.
func imageFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				files[h.Name], _ = io.ReadAll(tr)
			}
		}
		rc.Close()
	}
	return files
}

func extract(t *testing.T, archive []byte, dir string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkKrew reads the krew manifest as krew would: a Plugin named
// prober at the build's version as SemVer, one platform an arch, each
// naming its archive under the URL with the archive's sha256, the
// archive holding kubectl-prober, an ELF of that machine.
func checkKrew(t *testing.T, dir string, raw []byte) {
	t.Helper()
	var p krewPlugin
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		t.Fatalf("prober.yaml: %v", err)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "prober" || p.Spec.Version != "v0.0.0-test" {
		t.Errorf("krew manifest: %s %s %s %s", p.APIVersion, p.Kind, p.Metadata.Name, p.Spec.Version)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, pl := range p.Spec.Platforms {
		arch := pl.Selector.MatchLabels["arch"]
		name := "kubectl-prober_linux_" + arch + ".tar.gz"
		if pl.URI != "https://example.com/rel/"+name || pl.Bin != "kubectl-prober" || pl.Selector.MatchLabels["os"] != "linux" {
			t.Errorf("%s: uri %s bin %s", arch, pl.URI, pl.Bin)
		}
		archive, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(archive); pl.Sha256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: sha256 %s is not the archive's", arch, pl.Sha256)
		}
		zr, err := gzip.NewReader(bytes.NewReader(archive))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		h, err := tr.Next()
		if err != nil || h.Name != "kubectl-prober" || h.Mode&0o111 == 0 {
			t.Fatalf("%s: first entry %+v (%v), want an executable kubectl-prober", arch, h, err)
		}
		bin, _ := io.ReadAll(tr)
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil || f.Machine != machines[arch] {
			t.Errorf("%s: kubectl-prober is no ELF for %v (%v)", arch, machines[arch], err)
		}
		delete(machines, arch)
	}
	if len(machines) != 0 {
		t.Errorf("no platform for %v", machines)
	}
}
