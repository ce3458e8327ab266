// Package browsertest drives a headless Chromium from Go tests over the
// DevTools protocol (chromedp): the matrix page's end-to-end tests and its
// load time at 5,000 nodes (docs/performance.md).
//
// Start gives a Browser with one tab. Its methods fail the test on error
// and are each bounded in time; the page's console errors, uncaught
// exceptions and failed loads are collected for Errors and NoErrors; when
// the test fails, a screenshot of the page and its console are kept
// ($PROBER_TEST_ARTIFACTS, else a directory under os.TempDir) and their
// paths logged. When the test ends, the browser, every process it forked
// and its fresh profile directory are gone, on failure too.
//
// The browser is Debian's /usr/bin/chromium (hack/deps.sh installs it) or
// $PROBER_CHROMIUM; nothing is downloaded. Without it Start skips the test,
// unless PROBER_REQUIRE_TOOLS is set, as `make test` does after installing
// it: then a missing browser fails instead of hiding a broken install.
//
// The flags keep the browser off the network: no background networking,
// component updates, sync or QUIC, so the only connections it makes are
// the test's own, to loopback.
package browsertest
