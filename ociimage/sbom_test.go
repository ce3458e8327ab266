package ociimage

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	spdxjson "github.com/spdx/tools-golang/json"
)

// TestSBOM describes hack/image's binary (a test binary records no
// modules), whose build information holds ggcr and the SPDX library among
// its modules, writes the document, reads it back with the SPDX library,
// and finds the main module and every module go.mod requires directly
// that the binary holds, each with its version and package URL.
func TestSBOM(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "image")
	if out, err := exec.Command("go", "build", "-trimpath", "-o", bin, "../hack/image").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := NewSBOM(SBOM{Name: "prober-test", Namespace: "https://example.com/spdx/test", Version: "v1.2.3", Binaries: []*debug.BuildInfo{bi}, Tool: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteSBOM(&buf, doc); err != nil {
		t.Fatal(err)
	}
	back, err := spdxjson.Read(&buf)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if back.SPDXVersion != "SPDX-2.3" || back.DocumentName != "prober-test" {
		t.Errorf("document %s %q", back.SPDXVersion, back.DocumentName)
	}
	type pkg struct{ version, purl string }
	pkgs := map[string]pkg{}
	for _, p := range back.Packages {
		var purl string
		for _, r := range p.PackageExternalReferences {
			if r.RefType == "purl" {
				purl = r.Locator
			}
		}
		pkgs[p.PackageName] = pkg{p.PackageVersion, purl}
	}
	want := map[string]pkg{
		"github.com/netprober/prober": {"v1.2.3", "pkg:golang/github.com/netprober/prober@v1.2.3"},
		"stdlib":                      {bi.GoVersion, "pkg:golang/stdlib@" + strings.TrimPrefix(bi.GoVersion, "go")},
	}
	inBinary := map[string]string{}
	for _, d := range bi.Deps {
		inBinary[d.Path] = d.Version
	}
	direct := directRequires(t)
	for _, m := range []string{"github.com/google/go-containerregistry", "github.com/spdx/tools-golang"} {
		if _, ok := inBinary[m]; !ok {
			t.Errorf("test binary's build info lacks %s: the test checks nothing", m)
		}
	}
	for path, version := range direct {
		if inBinary[path] == "" {
			continue // a test-only or other binary's dependency
		}
		want[path] = pkg{version, "pkg:golang/" + path + "@" + version}
	}
	for name, w := range want {
		if got, ok := pkgs[name]; !ok || got != w {
			t.Errorf("package %s = %+v (present %v), want %+v", name, got, ok, w)
		}
	}
	if len(back.Packages) != len(bi.Deps)+2 {
		t.Errorf("%d packages, want %d: the main module, stdlib and each dependency", len(back.Packages), len(bi.Deps)+2)
	}
}

// directRequires reads go.mod's requirements not marked indirect.
func directRequires(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reqs := map[string]string{}
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		switch {
		case line == "require (":
			in = true
		case line == ")":
			in = false
		case in && !strings.Contains(line, "// indirect"):
			if f := strings.Fields(line); len(f) == 2 {
				reqs[f[0]] = f[1]
			}
		}
	}
	if len(reqs) == 0 {
		t.Fatal("go.mod: no direct requirements read")
	}
	return reqs
}

func TestGoPURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ path, version, want string }{
		{"github.com/BurntSushi/toml", "v1.5.0", "pkg:golang/github.com/BurntSushi/toml@v1.5.0"},
		{"github.com/docker/cli", "v29.7.2+incompatible", "pkg:golang/github.com/docker/cli@v29.7.2%2Bincompatible"},
		{"github.com/netprober/prober", "(devel)", "pkg:golang/github.com/netprober/prober"},
	} {
		if got := goPURL(tc.path, tc.version); got != tc.want {
			t.Errorf("goPURL(%s, %s) = %s, want %s", tc.path, tc.version, got, tc.want)
		}
	}
}
