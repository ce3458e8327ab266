package browsertest

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// processesUsing lists the processes with dir on their command line: the
// browser and its helpers, which all carry --user-data-dir. The directory
// is a fresh temporary one, so no other process matches; no process group
// is needed (Chromium's zygote starts its own sessions).
func processesUsing(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(dir)
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for arg := range bytes.SplitSeq(cmdline, []byte{0}) {
			if bytes.Contains(arg, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// killProcessesUsing kills the processes using dir, looking again until
// three passes in a row find none (a helper may fork as its parent dies),
// for at most limit; it returns how many it killed.
func killProcessesUsing(dir string, limit time.Duration) int {
	killed := map[int]bool{}
	deadline := time.Now().Add(limit)
	for quiet := 0; quiet < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		pids := processesUsing(dir)
		if len(pids) == 0 {
			quiet++
			continue
		}
		quiet = 0
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed[pid] = true
			}
		}
	}
	return len(killed)
}
