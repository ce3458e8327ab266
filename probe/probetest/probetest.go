// Package probetest helps the tests of the probe engines and of their
// users (the agent): it runs them in a network namespace of their own
// (Main), makes further namespaces linked by veth pairs for paths with a
// router or loss in them (NS, Linux), and checks that connections and
// goroutines do not leak.
package probetest

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// OpenFDs counts the process's open file descriptors. It skips the test
// where /proc/self/fd cannot be read.
func OpenFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count file descriptors: %v", err)
	}
	return len(ents)
}

// Settle waits, at most 5s, for the goroutine and file descriptor counts
// to come down to the baselines plus slack, and returns the last counts.
func Settle(t testing.TB, goroutines, fds, slack int) (int, int) {
	t.Helper()
	var g, f int
	for range 500 {
		g, f = runtime.NumGoroutine(), OpenFDs(t)
		if g <= goroutines+slack && f <= fds+slack {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return g, f
}
