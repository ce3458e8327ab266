package browsertest

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testPage has what the harness drives: text, buttons whose effects come
// later (as the matrix page's fetches do), SVG text, and buttons that log
// an error, fail a fetch and throw. It is served with the matrix page's
// Content-Security-Policy, which forbids eval: the harness must work
// under it.
const testPage = `<!doctype html>
<html><head><title>browsertest</title></head>
<body>
<p id="out">idle</p>
<button id="go">go</button> <button id="log">log</button> <button id="boom">boom</button>
<svg id="svg" width="120" height="20"><text x="0" y="15">svg text</text></svg>
<script>
let clicks = 0;
document.getElementById("go").addEventListener("click", () => setTimeout(() => {
  clicks++;
  document.getElementById("out").textContent = "clicked " + clicks;
  document.body.dataset.ready = "1";
}, 100));
document.getElementById("log").addEventListener("click", () => {
  console.error("bad", 42);
  fetch("missing");
});
document.getElementById("boom").addEventListener("click", () => setTimeout(() => { throw new Error("kaboom") }, 0));
</script>
</body></html>`

func serve(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'")
		io.WriteString(w, testPage)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

func TestPage(t *testing.T) {
	url := serve(t)
	b := Start(t)
	b.Navigate(url)

	if got := b.Text("#out"); got != "idle" {
		t.Errorf("text before the click %q, want idle", got)
	}
	if got := b.Text("#svg text"); got != "svg text" {
		t.Errorf("SVG text %q, want %q", got, "svg text")
	}
	var n int
	b.Eval("1 + 2", &n)
	var s string
	b.Eval(`new Promise(r => setTimeout(() => r("later"), 10))`, &s)
	if n != 3 || s != "later" {
		t.Errorf("eval: %d and %q, want 3 and later", n, s)
	}
	const ready = `document.body.dataset.ready == "1"`
	if b.Eventually(ready, 200*time.Millisecond) {
		t.Fatal("ready before the click")
	}
	b.WaitVisible("#go", 5*time.Second)
	b.Click("#go")
	b.WaitUntil(ready, 5*time.Second)
	if got := b.Text("#out"); got != "clicked 1" {
		t.Errorf("text after the click %q, want %q", got, "clicked 1")
	}

	img, err := png.Decode(bytes.NewReader(b.Screenshot()))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w != 1280 || h != 900 {
		t.Errorf("screenshot %dx%d, want the viewport's 1280x900 (the page fits in it)", w, h)
	}
	if !drawn(img) {
		t.Error("screenshot is one colour: nothing was drawn")
	}
	if errs := b.Errors(); len(errs) > 0 {
		t.Fatalf("errors before any was caused (the harness's own calls must log none): %v", errs)
	}

	b.Click("#log")
	b.Click("#boom")
	if !waitFor(func() bool { return len(b.Errors()) >= 3 }) {
		t.Fatalf("errors %v, want the console error, the failed fetch and the exception", b.Errors())
	}
	var console, network, exception int
	for _, m := range b.Errors() {
		switch {
		case m.Source == "console" && m.Text == "bad 42":
			console++
		case m.Source == "network" && strings.Contains(m.Text, "404") && strings.HasSuffix(m.URL, "/missing"):
			network++
		case m.Source == "exception" && strings.Contains(m.Text, "kaboom") && m.Line > 0:
			exception++
		default:
			t.Errorf("unexpected %s", m)
		}
	}
	if console != 1 || network != 1 || exception != 1 {
		t.Errorf("console %d, network %d, exception %d errors, want one each: %v", console, network, exception, b.Errors())
	}
}

// TestCloseLeavesNothing: after Close no process of the browser runs and
// its profile is gone.
func TestCloseLeavesNothing(t *testing.T) {
	url := serve(t)
	b := Start(t)
	b.Navigate(url)
	if b.pid == 0 {
		t.Fatal("no browser pid")
	}
	// The scan must find the browser while it runs, or its finding
	// nothing after Close proves nothing.
	if procs := processesUsing(b.dir); len(procs) < 2 {
		t.Fatalf("processes using the profile while the browser runs: %v, want the browser and its helpers", procs)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if procs := processesUsing(b.dir); len(procs) > 0 {
		t.Errorf("processes %v left after Close", procs)
	}
	if err := syscall.Kill(b.pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("browser pid %d after Close: %v, want no such process", b.pid, err)
	}
	if _, err := os.Stat(b.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile %s after Close: %v, want it removed", b.dir, err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestFailureKeepsScreenshot fails a wait inside a fake test: the fake
// fails with the selector named, its cleanup keeps a screenshot and the
// console where PROBER_TEST_ARTIFACTS says, and the browser is gone.
func TestFailureKeepsScreenshot(t *testing.T) {
	url := serve(t)
	needChromium(t)
	artifacts := t.TempDir()
	t.Setenv("PROBER_TEST_ARTIFACTS", artifacts)
	var dir string
	reached := false
	f := runFake(t, func(ft testing.TB) {
		b := Start(ft)
		dir = b.dir
		b.Navigate(url)
		b.Click("#log")
		b.WaitVisible("#never", 300*time.Millisecond)
		reached = true
	})
	if !f.Failed() || reached {
		t.Fatalf("fake failed %v, went on after the failed wait %v; want failed and stopped", f.Failed(), reached)
	}
	if msg := f.errors(); !strings.Contains(msg, "#never") {
		t.Errorf("failure %q does not name the selector", msg)
	}
	pngs, _ := filepath.Glob(filepath.Join(artifacts, "TestFailureKeepsScreenshot_fake-*.png"))
	if len(pngs) != 1 {
		t.Fatalf("screenshots kept: %v, want one", pngs)
	}
	if raw, err := os.ReadFile(pngs[0]); err != nil {
		t.Error(err)
	} else if _, err := png.Decode(bytes.NewReader(raw)); err != nil {
		t.Errorf("kept screenshot: %v", err)
	}
	if !strings.Contains(f.logged(), pngs[0]) {
		t.Errorf("the screenshot's path is not logged: %s", f.logged())
	}
	consoles, _ := filepath.Glob(filepath.Join(artifacts, "TestFailureKeepsScreenshot_fake-*.console.txt"))
	if len(consoles) != 1 {
		t.Fatalf("console logs kept: %v, want one", consoles)
	}
	if raw, _ := os.ReadFile(consoles[0]); !strings.Contains(string(raw), "bad 42") {
		t.Errorf("kept console %q lacks the page's error", raw)
	}
	if procs := processesUsing(dir); len(procs) > 0 {
		t.Errorf("processes %v left after a failed test", procs)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile %s after a failed test: %v, want it removed", dir, err)
	}
}

// TestFailureArtifactsInTempDir: without PROBER_TEST_ARTIFACTS the
// screenshot goes to a new directory under os.TempDir named after the test.
func TestFailureArtifactsInTempDir(t *testing.T) {
	needChromium(t)
	t.Setenv("PROBER_TEST_ARTIFACTS", "")
	t.Setenv("TMPDIR", t.TempDir())
	f := runFake(t, func(ft testing.TB) {
		Start(ft)
		ft.Fatal("forced")
	})
	pngs, _ := filepath.Glob(filepath.Join(os.TempDir(), "prober-browser-TestFailureArtifactsInTempDir_fake-*", "*.png"))
	if len(pngs) != 1 || !strings.Contains(f.logged(), pngs[0]) {
		t.Errorf("screenshots %v under %s, log %q; want one, logged", pngs, os.TempDir(), f.logged())
	}
}

// TestNoErrorsFails: NoErrors fails the test, naming the error, and lets
// it go on.
func TestNoErrorsFails(t *testing.T) {
	url := serve(t)
	needChromium(t)
	t.Setenv("PROBER_TEST_ARTIFACTS", t.TempDir())
	reached := false
	f := runFake(t, func(ft testing.TB) {
		b := Start(ft)
		b.Navigate(url)
		b.NoErrors()
		if ft.Failed() {
			return
		}
		b.Click("#log")
		waitFor(func() bool { return len(b.Errors()) >= 2 })
		b.NoErrors()
		reached = true
	})
	if !f.Failed() || !reached {
		t.Fatalf("fake failed %v, went on %v; want both", f.Failed(), reached)
	}
	if msg := f.errors(); !strings.Contains(msg, "bad 42") || !strings.Contains(msg, "404") {
		t.Errorf("failure %q does not name the console error and the failed fetch", msg)
	}
}

// TestStartWithoutChromium: no browser skips, or fails under
// PROBER_REQUIRE_TOOLS.
func TestStartWithoutChromium(t *testing.T) {
	t.Setenv("PROBER_CHROMIUM", filepath.Join(t.TempDir(), "chromium"))
	for _, require := range []string{"", "1"} {
		t.Setenv("PROBER_REQUIRE_TOOLS", require)
		f := runFake(t, func(ft testing.TB) {
			Start(ft)
			ft.Error("Start returned without a browser")
		})
		if require == "" && (!f.Skipped() || f.Failed()) || require != "" && !f.Failed() {
			t.Errorf("PROBER_REQUIRE_TOOLS=%q: skipped %v, failed %v: %s%s", require, f.Skipped(), f.Failed(), f.errors(), f.logged())
		}
		if msg := f.errors() + f.logged(); !strings.Contains(msg, "PROBER_CHROMIUM") {
			t.Errorf("PROBER_REQUIRE_TOOLS=%q: %q does not say how to get a browser", require, msg)
		}
	}
}

// needChromium skips a test that calls Start inside a fake: the fake's
// skip would not skip the test.
func needChromium(t *testing.T) {
	if _, err := ExecPath(); err != nil {
		if os.Getenv("PROBER_REQUIRE_TOOLS") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// drawn reports whether an image has more than one colour.
func drawn(img image.Image) bool {
	r := img.Bounds()
	first := img.At(r.Min.X, r.Min.Y)
	for y := r.Min.Y; y < r.Max.Y; y += 2 {
		for x := r.Min.X; x < r.Max.X; x += 2 {
			if img.At(x, y) != first {
				return true
			}
		}
	}
	return false
}

// waitFor polls cond for up to 5 seconds.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// fakeT is a testing.TB that records failures and skips instead of
// reporting them, so that the harness's failure paths can be tested.
// Fatal and Skip end the body's goroutine, as testing's do.
type fakeT struct {
	testing.TB // the real test, for the methods not overridden

	mu              sync.Mutex
	failed, skipped bool
	errs, logs      strings.Builder
	cleanups        []func()
}

// runFake runs body with a fakeT, then its cleanups, last first, each in a
// goroutine of its own as testing runs them.
func runFake(t *testing.T, body func(testing.TB)) *fakeT {
	f := &fakeT{TB: t}
	inGoroutine(func() { body(f) })
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		inGoroutine(f.cleanups[i])
	}
	return f
}

func inGoroutine(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

func (f *fakeT) Name() string { return f.TB.Name() + "/fake" }
func (f *fakeT) Helper()      {}
func (f *fakeT) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}
func (f *fakeT) Log(args ...any)                 { f.log(fmt.Sprintln(args...)) }
func (f *fakeT) Logf(format string, args ...any) { f.log(fmt.Sprintf(format, args...) + "\n") }
func (f *fakeT) Error(args ...any)               { f.fail(fmt.Sprintln(args...)) }
func (f *fakeT) Errorf(format string, args ...any) {
	f.fail(fmt.Sprintf(format, args...) + "\n")
}
func (f *fakeT) Fatal(args ...any)                 { f.Error(args...); runtime.Goexit() }
func (f *fakeT) Fatalf(format string, args ...any) { f.Errorf(format, args...); runtime.Goexit() }
func (f *fakeT) Fail()                             { f.fail("") }
func (f *fakeT) FailNow()                          { f.Fail(); runtime.Goexit() }
func (f *fakeT) Skip(args ...any)                  { f.skip(fmt.Sprintln(args...)) }
func (f *fakeT) Skipf(format string, args ...any)  { f.skip(fmt.Sprintf(format, args...) + "\n") }
func (f *fakeT) SkipNow()                          { f.skip("") }

func (f *fakeT) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *fakeT) Skipped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.skipped
}

func (f *fakeT) log(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs.WriteString(s)
}

func (f *fakeT) fail(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
	f.errs.WriteString(s)
}

func (f *fakeT) skip(s string) {
	f.mu.Lock()
	f.skipped = true
	f.logs.WriteString(s)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeT) errors() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errs.String()
}

func (f *fakeT) logged() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logs.String()
}
