//go:build !linux

package browsertest

import "time"

// processesUsing finds nothing off Linux: there is no /proc to read.
// chromedp still kills the browser's main process.
func processesUsing(string) []int { return nil }

func killProcessesUsing(string, time.Duration) int { return 0 }
