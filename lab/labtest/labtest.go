// Package labtest helps tests build network-namespace fabrics with lab:
// privilege checks that skip, unique prefixes, and teardown in t.Cleanup.
package labtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
)

// NeedNetAdmin skips the test, saying why, under -short or when the
// process may not create network namespaces (not root, or no
// CAP_NET_ADMIN and CAP_SYS_ADMIN).
func NeedNetAdmin(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds network namespaces: skipped under -short")
	}
	if err := lab.NeedNetAdmin(); err != nil {
		t.Skipf("skipped: %v", err)
	}
}

var seq atomic.Uint32

// testPrefix is "lt" + the pid (6 hex digits) + a per-process counter (2
// hex digits): unique among concurrent test processes, and a leftover's
// owner can be checked for life.
var testPrefix = regexp.MustCompile(`^lt([0-9a-f]{6})[0-9a-f]{2}$`)

// Prefix returns a lab prefix no other test, in this process or another,
// uses. It first removes leftovers of test processes that died before
// their cleanup ran.
func Prefix(t testing.TB) string {
	t.Helper()
	sweep(t)
	return fmt.Sprintf("lt%06x%02x", os.Getpid()&0xffffff, seq.Add(1)&0xff)
}

// sweep downs labs whose test process is gone.
func sweep(t testing.TB) {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		i := len(name)
		for j, c := range name {
			if c == '-' {
				i = j
				break
			}
		}
		prefix := name[:i]
		m := testPrefix.FindStringSubmatch(prefix)
		if m == nil || seen[prefix] {
			continue
		}
		seen[prefix] = true
		pid, _ := strconv.ParseUint(m[1], 16, 32)
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, fs.ErrNotExist) {
			if err := lab.Down(prefix); err != nil {
				t.Logf("sweep leftover lab %s: %v", prefix, err)
			}
		}
	}
}

// Up builds spec under a unique prefix (spec.Prefix is ignored) and
// downs it in t.Cleanup; it skips like NeedNetAdmin and fails the test if
// the fabric cannot be built.
func Up(t testing.TB, spec lab.Spec) *lab.Fabric {
	t.Helper()
	NeedNetAdmin(t)
	spec.Prefix = Prefix(t)
	t.Cleanup(func() {
		if err := lab.Down(spec.Prefix); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	f, err := lab.Up(ctx, spec, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatalf("lab up: %v", err)
	}
	t.Logf("lab %s up in %v", spec.Prefix, time.Since(start).Round(time.Millisecond))
	return f
}
