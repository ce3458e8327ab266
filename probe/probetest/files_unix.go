//go:build unix

package probetest

import (
	"syscall"
	"testing"
)

// NeedFiles raises the test process's soft limit on open files to n
// (each loopback connection is two), or skips.
func NeedFiles(t testing.TB, n uint64) {
	t.Helper()
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	if l.Cur >= n {
		return
	}
	if l.Max < n {
		t.Skipf("needs %d open files, the hard limit is %d", n, l.Max)
	}
	l.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Skipf("raise open files to %d: %v", n, err)
	}
}
