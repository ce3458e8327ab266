package testbed

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
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
