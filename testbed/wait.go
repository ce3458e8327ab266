package testbed

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/netprober/prober/matrix"
)

// WaitProgress waits d, or until ctx ends, drawing a progress bar on w
// (redrawn with carriage returns) while windows fill.
func WaitProgress(ctx context.Context, w io.Writer, d time.Duration) error {
	const width = 30
	start := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		done := min(time.Since(start), d)
		n := int(float64(width) * float64(done) / float64(d))
		fmt.Fprintf(w, "\r    [%s%s] %4.1fs / %.0fs", strings.Repeat("#", n), strings.Repeat(".", width-n), done.Seconds(), d.Seconds())
		if done >= d {
			fmt.Fprintln(w)
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// waitMatrix polls read every second until cond holds for what it reads
// or within passes, drawing progress on out: a terminal (tty) gets one
// line redrawn every second, a log or a pipe a line every ten. A read
// that fails is retried: a matrix that restarts comes back. It returns
// how long it took.
func waitMatrix(ctx context.Context, out io.Writer, tty bool, within time.Duration, what string,
	read func(context.Context) (matrix.Diagnosis, matrix.Snapshot, error), cond func(matrix.Diagnosis, matrix.Snapshot) bool) (time.Duration, error) {
	if out == nil {
		out = io.Discard
	}
	start := time.Now()
	var last error
	for i := 0; ; i++ {
		d, snap, err := read(ctx)
		if last = err; err == nil && cond(d, snap) {
			fmt.Fprintf(out, "\r    %s: %.0fs%s\n", what, time.Since(start).Seconds(), strings.Repeat(" ", 30))
			return time.Since(start), nil
		}
		if time.Since(start) > within {
			fmt.Fprintln(out)
			if last != nil {
				return time.Since(start), fmt.Errorf("%s: not within %s: %w", what, within, last)
			}
			return time.Since(start), fmt.Errorf("%s: not within %s", what, within)
		}
		if tty {
			fmt.Fprintf(out, "\r    waiting for %s: %.0fs / %.0fs", what, time.Since(start).Seconds(), within.Seconds())
		} else if i%10 == 0 {
			fmt.Fprintf(out, "    waiting for %s: %.0fs / %.0fs\n", what, time.Since(start).Seconds(), within.Seconds())
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(out)
			return time.Since(start), ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
