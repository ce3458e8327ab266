package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// DefaultTimeout bounds each call that takes no timeout of its own.
const DefaultTimeout = 30 * time.Second

const (
	// lifetime bounds the whole browser, shortened to the test binary's
	// -timeout: a test that hangs does not leave Chromium running.
	lifetime = 10 * time.Minute
	// startTimeout bounds Chromium's start, its first tab included.
	startTimeout = time.Minute
	// closeTimeout bounds the graceful close before the process is killed.
	closeTimeout = 5 * time.Second
)

// Options shape the browser.
type Options struct {
	// Width and Height are the viewport in CSS pixels; 1280 by 900 when
	// zero.
	Width, Height int
	// Timeout bounds each call that takes no timeout argument;
	// DefaultTimeout when zero.
	Timeout time.Duration
}

// Browser is a headless Chromium with one tab, for one test. Call its
// methods from the test's goroutine: they fail the test with t.Fatalf.
type Browser struct {
	t      testing.TB
	opts   Options
	path   string
	dir    string          // the profile (--user-data-dir): ours alone
	ctx    context.Context // the tab's
	cancel context.CancelFunc
	pid    int

	mu      sync.Mutex
	console []Message
	closed  bool
}

// ExecPath is the Chromium that Start runs: $PROBER_CHROMIUM (a path, or a
// name looked up in PATH), else /usr/bin/chromium.
func ExecPath() (string, error) {
	p := os.Getenv("PROBER_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	found, err := exec.LookPath(p)
	if err != nil {
		return "", fmt.Errorf("chromium: %w (Debian package chromium, which hack/deps.sh installs; or set PROBER_CHROMIUM)", err)
	}
	return found, nil
}

// Start starts a headless Chromium with the default Options. It skips the
// test when there is no Chromium, or fails it when PROBER_REQUIRE_TOOLS
// is set.
func Start(t testing.TB) *Browser {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Browser {
	t.Helper()
	path, err := ExecPath()
	if err != nil {
		if os.Getenv("PROBER_REQUIRE_TOOLS") != "" {
			t.Fatalf("%v, and PROBER_REQUIRE_TOOLS is set", err)
		}
		t.Skip(err)
	}
	if o.Width <= 0 || o.Height <= 0 {
		o.Width, o.Height = 1280, 900
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	dir, err := os.MkdirTemp("", "prober-chromium-")
	if err != nil {
		t.Fatalf("browsertest: profile directory: %v", err)
	}
	b := &Browser{t: t, opts: o, path: path, dir: dir}
	// Registered before the start, so that a start that fails half-way
	// still ends whatever it started and removes the profile.
	t.Cleanup(b.cleanup)

	flags := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(o.Width, o.Height),
		chromedp.DisableGPU,
		// Off the network: without these Chromium dials Google's
		// hosts at every start, which this project's machines refuse.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
	)
	if os.Geteuid() == 0 {
		// Chromium's sandbox refuses to run as root.
		flags = append(flags, chromedp.NoSandbox)
	}
	limit := lifetime
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok && time.Until(dl) < limit {
			limit = time.Until(dl)
		}
	}
	root, cancelRoot := context.WithTimeout(context.Background(), limit)
	actx, cancelAlloc := chromedp.NewExecAllocator(root, flags...)
	tab, cancelTab := chromedp.NewContext(actx, chromedp.WithListener(b.listen))
	b.ctx = tab
	b.cancel = func() { cancelTab(); cancelAlloc(); cancelRoot() }

	// The first call starts the browser, which then lives as long as the
	// tab's context: a timeout on that call would end it, so the start
	// is bounded by a timer instead.
	// --window-size leaves headless Chromium's viewport short of the
	// height asked for; the viewport is set exactly.
	timer := time.AfterFunc(startTimeout, cancelRoot)
	err = chromedp.Do(tab, chromedp.EmulateViewport(int64(o.Width), int64(o.Height)))
	timer.Stop()
	if err != nil {
		t.Fatalf("browsertest: start %s: %v", path, err)
	}
	if p := chromedp.FromContext(tab).Browser.Process(); p != nil {
		b.pid = p.Pid
	}
	return b
}

// Close ends the browser and every process it started, and removes its
// profile. The test's cleanup calls it; a test may call it earlier, to
// check what is left behind. It is idempotent.
func (b *Browser) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	if b.cancel != nil {
		// A graceful close lets Chromium end its own helpers; cancelling
		// then kills the main process (by pid) if it did not exit, and
		// waits for it.
		ctx, cancel := context.WithTimeout(b.ctx, closeTimeout)
		chromedp.Cancel(ctx)
		cancel()
		b.cancel()
	}
	var errs []error
	// Helpers (zygote, renderers, the network service) can outlive a
	// killed main process; each carries the profile on its command line.
	if n := killProcessesUsing(b.dir, 2*time.Second); n > 0 {
		b.t.Logf("browsertest: killed %d chromium processes that outlived the browser", n)
	}
	if left := processesUsing(b.dir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("chromium processes %v still running after close", left))
	}
	// A helper can still write in the profile just after it exits.
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err = os.RemoveAll(b.dir); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("remove profile: %w", err))
	}
	return errors.Join(errs...)
}

func (b *Browser) cleanup() {
	if b.t.Failed() && b.ctx != nil && b.ctx.Err() == nil {
		b.keepArtifacts()
	}
	if err := b.Close(); err != nil {
		b.t.Errorf("browsertest: %v", err)
	}
}

// keepArtifacts writes a screenshot of the page and its console into the
// artifact directory and logs their paths.
func (b *Browser) keepArtifacts() {
	dir, err := artifactDir(b.t.Name())
	if err != nil {
		b.t.Logf("browsertest: no artifacts kept: %v", err)
		return
	}
	prefix := sanitize(b.t.Name())
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	url, _ := chromedp.Run(ctx, chromedp.Location())
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err != nil {
		b.t.Logf("browsertest: no screenshot of %s: %v", url, err)
	} else if path, err := writeTemp(dir, prefix+"-*.png", png); err != nil {
		b.t.Logf("browsertest: %v", err)
	} else {
		b.t.Logf("browsertest: screenshot of %s at the failure: %s", url, path)
	}
	var sb strings.Builder
	for _, m := range b.Console() {
		fmt.Fprintln(&sb, m)
	}
	if sb.Len() > 0 {
		if path, err := writeTemp(dir, prefix+"-*.console.txt", []byte(sb.String())); err != nil {
			b.t.Logf("browsertest: %v", err)
		} else {
			b.t.Logf("browsertest: the page's console: %s", path)
		}
	}
}

// artifactDir is $PROBER_TEST_ARTIFACTS, else a new directory under
// os.TempDir named after the test.
func artifactDir(test string) (string, error) {
	if d := os.Getenv("PROBER_TEST_ARTIFACTS"); d != "" {
		return d, os.MkdirAll(d, 0o755)
	}
	return os.MkdirTemp("", "prober-browser-"+sanitize(test)+"-")
}

func writeTemp(dir, pattern string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return f.Name(), err
}

// sanitize makes a test name (TestX/sub case) one file-name element.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r == filepath.Separator || r == ' ' || r == ':' {
			return '_'
		}
		return r
	}, name)
}
