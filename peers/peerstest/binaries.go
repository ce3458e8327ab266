package peerstest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// Binaries returns the directory holding kube-apiserver, etcd and kubectl:
// $PROBER_KUBE_ASSETS if it has them, else what hack/kube/build.sh builds
// or finds cached (a cold build takes minutes; progress goes to stderr).
func Binaries(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped under -short: needs a real kube-apiserver and etcd")
	}
	// A cold build takes 7-25 minutes on 2 cores: longer than a plain
	// `go test`'s default 10-minute timeout. Build inside the test only
	// when it has time for it (make test gives 60 minutes, and builds
	// first anyway); otherwise use what is cached, or skip.
	deadline, ok := t.(interface{ Deadline() (time.Time, bool) })
	build := true
	if ok {
		if d, has := deadline.Deadline(); has && time.Until(d) < 40*time.Minute {
			build = false
		}
	}
	binOnce.Do(func() { binDir, binErr = findOrBuild(build) })
	if binErr != nil {
		if os.Getenv("PROBER_KUBE_REQUIRED") != "" {
			t.Fatalf("kube-apiserver binaries: %v", binErr)
		}
		t.Skipf("kube-apiserver binaries unavailable (set PROBER_KUBE_REQUIRED=1 to fail instead): %v", binErr)
	}
	return binDir
}

func complete(dir string) bool {
	for _, b := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

func findOrBuild(build bool) (string, error) {
	if d := os.Getenv("PROBER_KUBE_ASSETS"); d != "" && complete(d) {
		return d, nil
	}
	script, err := repoFile("hack/kube/build.sh")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("sh", script)
	if !build {
		cmd.Env = append(os.Environ(), "PROBER_KUBE_CACHED_ONLY=1")
		if out, err := cmd.Output(); err == nil && complete(strings.TrimSpace(string(out))) {
			return strings.TrimSpace(string(out)), nil
		}
		return "", fmt.Errorf("not built yet, and a cold build (7-25 min) does not fit this test's -timeout: run `make kube` first, or `make test`")
	}
	fmt.Fprintf(os.Stderr, "peerstest: %s (cold build: several minutes)\n", script)
	start := time.Now()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w", script, err)
	}
	dir := strings.TrimSpace(out.String())
	if !complete(dir) {
		return "", fmt.Errorf("%s printed %q, which lacks the binaries", script, dir)
	}
	fmt.Fprintf(os.Stderr, "peerstest: binaries in %s (%s)\n", dir, time.Since(start).Round(time.Second))
	return dir, nil
}

// repoFile finds rel in the repository, walking up from the test's
// working directory (its package directory).
func repoFile(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 10 {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("%s not found above the working directory", rel)
}

// RepoFile is repoFile for tests: the path of rel in the repository.
func RepoFile(t testing.TB, rel string) string {
	t.Helper()
	p, err := repoFile(rel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
