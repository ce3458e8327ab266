package testbed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcessSpec says how to start a program in a lab namespace.
type ProcessSpec struct {
	// Host is the lab host or router whose namespace the program runs in
	// ("n11", "spine1"; a namespace name such as "plab-n11" works too).
	Host string
	// Name names the program in errors and its log, Dir/Name.log.
	Name string
	Path string   // the program
	Args []string // its arguments
	Env  []string // added to this process's environment
	// Dir holds the log; it must exist.
	Dir string
	// Cgroup, when set, is a cgroup v2 directory the program and all its
	// descendants start in, so that what a daemon leaves behind (shims,
	// containers) is found by membership, never by name.
	Cgroup string
	// MountNS gives the program a mount namespace of its own with every
	// mount private: what it mounts never reaches the machine's.
	MountNS bool
	// StopGrace is how long Close lets the program exit after SIGTERM
	// before killing it; 5 s when zero.
	StopGrace time.Duration
}

// stopGrace is how long a program has to exit after SIGTERM before it is
// killed, unless its ProcessSpec says otherwise.
const stopGrace = 5 * time.Second

// Process is a program started by StartProcess.
type Process struct {
	name, log string
	grace     time.Duration // after SIGTERM, before SIGKILL
	cmd       *exec.Cmd
	done      chan struct{} // closed when the program has exited
	waitErr   error         // cmd.Wait's, once done is closed

	closeOnce sync.Once
	closeErr  error
}

// Name is the ProcessSpec's Name.
func (p *Process) Name() string { return p.name }

// Pid is the program's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the program (by the pid StartProcess started, never
// by name).
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// LogTail returns the last n lines of the program's output.
func (p *Process) LogTail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// failure wraps err, what went wrong with the program, with its log's
// last lines.
func (p *Process) failure(err error) error {
	return fmt.Errorf("%s: %w; its log ends:\n  %s", p.name, err, strings.ReplaceAll(p.LogTail(5), "\n", "\n  "))
}

// exited returns, once the program has exited, why; nil while it runs.
func (p *Process) exited() error {
	select {
	case <-p.done:
		if p.waitErr != nil {
			return fmt.Errorf("exited: %w", p.waitErr)
		}
		return errors.New("exited")
	default:
		return nil
	}
}

// waitOK polls u with c every 100 ms until it answers 200 OK. It fails,
// with the program's last log lines, when within passes or the program
// exits first: what it should be by then ("healthy", "ready") names the
// wait.
func (p *Process) waitOK(ctx context.Context, c *http.Client, u string, within time.Duration, what string) error {
	deadline := time.Now().Add(within)
	for {
		_, status, err := get(ctx, c, u)
		if err == nil && status == http.StatusOK {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("%d %s", status, http.StatusText(status))
		}
		if exit := p.exited(); exit != nil {
			return p.failure(exit)
		}
		if time.Now().After(deadline) {
			return p.failure(fmt.Errorf("not %s within %v: %w", what, within, err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close stops the program with SIGTERM, or SIGKILL after its grace, and waits
// for it. It returns an error when the program had to be killed or had
// exited by itself with a failure before Close; a second Close returns
// the first one's result.
func (p *Process) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.stop() })
	return p.closeErr
}

func (p *Process) stop() error {
	select {
	case <-p.done:
		// A context the program was started with ends it too; that is
		// a stop, not a failure.
		if p.waitErr != nil && !errors.Is(p.waitErr, context.Canceled) && !errors.Is(p.waitErr, context.DeadlineExceeded) {
			return p.failure(fmt.Errorf("exited before it was stopped: %w", p.waitErr))
		}
		return nil
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(p.grace):
	}
	// Every program the testbed runs is Go: SIGQUIT makes it print its
	// goroutines and exit, and where ours wait says why it hung.
	p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(quitGrace):
		p.cmd.Process.Kill()
		<-p.done
	}
	b, _ := os.ReadFile(p.log)
	err := fmt.Errorf("killed: still running %v after SIGTERM", p.grace)
	if w := waiting(string(b), modulePrefix, 12); w != "" {
		err = fmt.Errorf("%w; where its goroutines were (SIGQUIT):\n  %s", err, strings.ReplaceAll(w, "\n", "\n  "))
	}
	return p.failure(err)
}

// quitGrace is how long a hung program has to print its goroutines after
// SIGQUIT before it is killed.
const quitGrace = 2 * time.Second

// modulePrefix marks this repository's functions in a goroutine dump.
const modulePrefix = "github.com/netprober/prober/"

// waiting summarises a Go goroutine dump in log: for each goroutine, its
// state and the innermost function of ours (prefix) on its stack, counted
// alike, at most n lines, most first. Goroutines with none of ours (the
// runtime's, the libraries' own) are left out.
func waiting(log, prefix string, n int) string {
	counts := map[string]int{}
	state, found := "", false
	for _, line := range strings.Split(log, "\n") {
		switch {
		case strings.HasPrefix(line, "goroutine ") && strings.HasSuffix(line, ":"):
			state, found = "", false
			if i, j := strings.IndexByte(line, '['), strings.LastIndexByte(line, ']'); i >= 0 && j > i {
				state, _, _ = strings.Cut(line[i+1:j], ",") // "semacquire, 2 minutes"
			}
		case !found && state != "" && strings.HasPrefix(line, prefix):
			found = true
			fn := strings.TrimPrefix(line, prefix)
			if i := strings.LastIndexByte(fn, '('); i > 0 {
				fn = fn[:i]
			}
			counts["["+state+"] "+fn]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int { return cmp.Or(cmp.Compare(counts[y], counts[x]), strings.Compare(x, y)) })
	var out []string
	for _, k := range keys[:min(len(keys), n)] {
		out = append(out, fmt.Sprintf("%d x %s", counts[k], k))
	}
	return strings.Join(out, "\n")
}

// Usage is what a program holds and has spent, read from /proc: the
// figures docs/performance.md gives for the agent.
type Usage struct {
	// RSS is VmRSS, the resident memory now; PeakRSS is VmHWM, its high
	// water mark since the start. Bytes.
	RSS, PeakRSS uint64
	// Anon and File split RSS (RssAnon, RssFile): the program's own
	// memory, and the pages of its executable it maps, which are page
	// cache shared with every other process running the same file.
	Anon, File uint64
	// CPU is utime + stime since the start.
	CPU time.Duration
}
