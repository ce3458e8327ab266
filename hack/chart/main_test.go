package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"

	"github.com/netprober/prober/charts"
	"github.com/netprober/prober/peers/peerstest"
)

const chartDir = "../../charts/prober"

// TestPackage packages the chart as `make chart` does and reads the
// archive back as `helm install` and `helm lint --strict` would: the
// build's version and appVersion stamped, ArtifactHub's annotations,
// every file of the source chart in it unchanged, lint clean, and every
// workload rendered from it running the image of its appVersion.
func TestPackage(t *testing.T) {
	dir := t.TempDir()
	changes := filepath.Join(dir, "changes.txt")
	if err := os.WriteFile(changes, []byte("- chart packaged by make chart\n\nimage tag defaults to appVersion\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const build = "v1.2.3-4-gabcdef0-dirty"
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-chart", chartDir, "-version", build, "-o", dir, "-changes", changes}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	archive := filepath.Join(dir, "prober-1.2.3-4-gabcdef0-dirty.tgz")
	if !strings.Contains(stdout.String(), archive) {
		t.Errorf("stdout %q does not name %s", stdout.String(), archive)
	}
	got, err := loader.Load(archive)
	if err != nil {
		t.Fatal(err)
	}
	if got.Metadata.Version != "1.2.3-4-gabcdef0-dirty" || got.Metadata.AppVersion != build {
		t.Errorf("version %q appVersion %q, want 1.2.3-4-gabcdef0-dirty and %s", got.Metadata.Version, got.Metadata.AppVersion, build)
	}
	ann := got.Metadata.Annotations
	var images []struct {
		Name, Image string
		Platforms   []string
	}
	if err := yaml.Unmarshal([]byte(ann["artifacthub.io/images"]), &images); err != nil {
		t.Fatalf("artifacthub.io/images: %v", err)
	}
	if len(images) != 1 || images[0].Image != "ghcr.io/netprober/prober:"+build || !slices.Equal(images[0].Platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("artifacthub.io/images = %+v", images)
	}
	var ch []string
	if err := yaml.Unmarshal([]byte(ann["artifacthub.io/changes"]), &ch); err != nil || !slices.Equal(ch, []string{"chart packaged by make chart", "image tag defaults to appVersion"}) {
		t.Errorf("artifacthub.io/changes = %q (%v)", ann["artifacthub.io/changes"], err)
	}
	if ann["artifacthub.io/prerelease"] != "true" || ann["artifacthub.io/links"] == "" {
		t.Errorf("prerelease %q, links %q: want true and Chart.yaml's", ann["artifacthub.io/prerelease"], ann["artifacthub.io/links"])
	}

	src, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if d := filesDiffer(src, got); d != "" {
		t.Errorf("the archive is not the source chart: %s", d)
	}

	expanded := t.TempDir()
	if err := chartutil.ExpandFile(expanded, archive); err != nil {
		t.Fatal(err)
	}
	l := lint.All(filepath.Join(expanded, "prober"), nil, "prober", false)
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint --strict of the archive: %s", m)
		}
	}

	manifest, _, err := charts.Render(archive, "prober", "prober", nil)
	if err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`(?m)^\s+image: (\S+)$`).FindAllStringSubmatch(manifest, -1)
	if len(refs) < 3 {
		t.Fatalf("%d images rendered, want the two agents' and the matrix's", len(refs))
	}
	for _, r := range refs {
		if r[1] != "ghcr.io/netprober/prober:"+build {
			t.Errorf("rendered image %s, want the appVersion's", r[1])
		}
	}
	tagged, _, err := charts.Render(archive, "prober", "prober", map[string]any{"image": map[string]any{"tag": "v9"}})
	if err != nil || strings.Contains(tagged, build) || !strings.Contains(tagged, "ghcr.io/netprober/prober:v9") {
		t.Errorf("image.tag v9 does not win over the appVersion (%v)", err)
	}
}

// filesDiffer says how two charts' files differ, "" when every
// template, file, schema and values.yaml is the same.
func filesDiffer(a, b *chart.Chart) string {
	files := func(c *chart.Chart) map[string]string {
		m := map[string]string{"values.schema.json": string(c.Schema)}
		for _, f := range slices.Concat(c.Templates, c.Files, c.Raw) {
			if f.Name != "Chart.yaml" {
				m[f.Name] = string(f.Data)
			}
		}
		return m
	}
	fa, fb := files(a), files(b)
	for name, body := range fa {
		if got, ok := fb[name]; !ok {
			return name + " is missing"
		} else if got != body {
			return name + " differs"
		}
	}
	if len(fa) != len(fb) {
		return "the archive has files the source has not"
	}
	return ""
}

// TestBadInput: a missing chart, stray arguments and a changes file past
// the bound each get a message and an exit code, and write nothing.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "long.txt")
	if err := os.WriteFile(long, bytes.Repeat([]byte("a change\n"), maxChanges+1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"-chart", filepath.Join(dir, "none"), "-o", dir}, 1, "load"},
		{[]string{"-chart", chartDir, "-o", dir, "extra"}, 2, "unexpected arguments"},
		{[]string{"-chart", chartDir, "-o", dir, "-changes", long}, 1, "more than 64 lines"},
		{[]string{"-chart", chartDir, "-o", dir, "-changes", filepath.Join(dir, "absent")}, 1, "changes"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.says) {
			t.Errorf("%q: exit %d, %q; want %d saying %q", c.args, code, stderr.String(), c.code, c.says)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tgz")); len(m) > 0 {
		t.Errorf("wrote %v on bad input", m)
	}
}

// TestRealHelm hands the package to the helm CLI itself (built by
// hack/kube/build.sh at the release of the Helm packages above): `helm
// lint --strict` and `helm template` of the archive, then `helm push` to
// an OCI registry on loopback and `helm template oci://...` back from it,
// as the README's install does.
func TestRealHelm(t *testing.T) {
	helm := filepath.Join(peerstest.Binaries(t), "helm")
	if _, err := os.Stat(helm); err != nil {
		if os.Getenv("PROBER_KUBE_REQUIRED") != "" {
			t.Fatalf("helm: %v (hack/kube/build.sh builds it)", err)
		}
		t.Skipf("helm not built (hack/kube/build.sh builds it): %v", err)
	}
	dir := t.TempDir()
	const build = "v0.3.0-2-g1234abc"
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-chart", chartDir, "-version", build, "-o", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	archive := filepath.Join(dir, "prober-0.3.0-2-g1234abc.tgz")
	home := t.TempDir()
	helmRun := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(helm, args...)
		// Helm's config, cache and registry logins stay in the test's own
		// directory, never the machine's home.
		cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home+"/cache",
			"HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data", "KUBECONFIG="+home+"/kubeconfig")
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut.Bytes())
		}
		return string(out)
	}
	if out := helmRun("lint", "--strict", archive); !strings.Contains(out, "0 chart(s) failed") {
		t.Errorf("helm lint --strict:\n%s", out)
	}
	want := ""
	drawn := regexp.MustCompile(`(?m)^  (ca\.crt|tls\.crt|tls\.key): \S+$`)
	for _, src := range []string{"archive", "registry"} {
		ref := archive
		var extra []string
		if src == "registry" {
			reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
			defer reg.Close()
			host := strings.TrimPrefix(reg.URL, "http://")
			helmRun("push", archive, "oci://"+host+"/charts", "--plain-http")
			ref = "oci://" + host + "/charts/prober"
			extra = []string{"--version", "0.3.0-2-g1234abc", "--plain-http"}
		}
		// The matrix's certificate is drawn anew at each render.
		out := drawn.ReplaceAllString(helmRun(append([]string{"template", "prober", ref, "-n", "prober"}, extra...)...), "$1: DRAWN")
		if n := strings.Count(out, "image: ghcr.io/netprober/prober:"+build); n < 3 {
			t.Errorf("helm template from the %s: %d workloads run the build's image, want 3 or more", src, n)
		}
		if want == "" {
			want = out
		} else if out != want {
			t.Errorf("helm template from the registry differs from the archive's")
		}
	}
}
