package testbed

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netprober/prober/config"
	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
)

// TestProcess runs programs in a lab host's namespace: one that runs
// until Close, one that fails before it, and an agent that exits at once,
// whose WaitHealthy must say so without waiting out its time.
func TestProcess(t *testing.T) {
	f := labtest.Up(t, lab.Spec{Spines: 1, Racks: 1, NodesPerRack: 1, PodsPerNode: -1})
	n11, _ := f.Host("n11")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	start := func(name, script string) *Process {
		t.Helper()
		p, err := StartProcess(ctx, f, ProcessSpec{Host: "n11", Name: name, Path: "/bin/sh", Args: []string{"-c", script}, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	waitLog := func(p *Process, want string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.LogTail(5), want); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: log %q lacks %q after 10s", p.Name(), p.LogTail(5), want)
			}
		}
	}

	t.Run("runs in the namespace until Close", func(t *testing.T) {
		var st syscall.Stat_t
		if err := syscall.Stat("/run/netns/"+n11.Namespace, &st); err != nil {
			t.Fatal(err)
		}
		p := start("sleeper", "readlink /proc/self/ns/net; echo ready; exec sleep 60")
		waitLog(p, "ready")
		if want := fmt.Sprintf("net:[%d]", st.Ino); !strings.Contains(p.LogTail(2), want) {
			t.Errorf("runs in %q, want %s (%s)", p.LogTail(2), want, n11.Namespace)
		}
		if err := p.exited(); err != nil {
			t.Fatalf("exited before Close: %v", err)
		}
		begin := time.Now()
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v, want nil after a stop by SIGTERM", err)
		}
		if took := time.Since(begin); took > time.Second {
			t.Errorf("Close took %v: SIGTERM did not end it", took)
		}
		if p.exited() == nil {
			t.Error("running after Close")
		}
		if err := p.Signal(syscall.Signal(0)); err == nil {
			t.Errorf("pid %d still signalable after Close", p.Pid())
		}
	})

	t.Run("a failure before Close is reported", func(t *testing.T) {
		p := start("failer", "echo boom; exit 3")
		for p.exited() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		err := p.Close()
		if err == nil || !strings.Contains(err.Error(), "exited before it was stopped") || !strings.Contains(err.Error(), "boom") {
			t.Errorf("Close: %v, want the exit and the log's last lines", err)
		}
	})

	t.Run("WaitHealthy sees an agent exit", func(t *testing.T) {
		// sh cannot open a script called "agent": it exits at once.
		a, err := StartAgent(ctx, f, AgentSpec{Prober: Prober{Path: "/bin/sh"}, Config: AgentConfig(n11, config.Probing{}), Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if a.Name() != "n11" || a.URL() != "http://"+n11.Addr.String()+":9808" {
			t.Errorf("agent %q at %q", a.Name(), a.URL())
		}
		begin := time.Now()
		err = a.WaitHealthy(ctx, 20*time.Second)
		if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "agent") {
			t.Errorf("WaitHealthy: %v, want the exit and the log", err)
		}
		if took := time.Since(begin); took > 5*time.Second {
			t.Errorf("WaitHealthy took %v for an agent that exited at once", took)
		}
		if _, err := os.Stat(dir + "/n11.yaml"); err != nil {
			t.Errorf("the agent's config: %v", err)
		}
	})
}

// TestParseUsage reads the fields docs/performance.md's agent figures
// come from, including a command name with spaces and parentheses.
func TestParseUsage(t *testing.T) {
	t.Parallel()
	status := "Name:\tprober\nVmPeak:\t 1260000 kB\nVmHWM:\t   90112 kB\nVmRSS:\t   85600 kB\nRssAnon:\t   60000 kB\nRssFile:\t   25600 kB\nThreads:\t9\n"
	u, err := parseStatus(status)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Usage{RSS: 85600 << 10, PeakRSS: 90112 << 10, Anon: 60000 << 10, File: 25600 << 10}); u != want {
		t.Errorf("got %+v, want %+v", u, want)
	}
	if _, err := parseStatus("Name:\tkworker/0:1\nThreads:\t1\n"); err == nil {
		t.Error("status without VmRSS: no error")
	}
	cases := []struct {
		stat string
		want time.Duration
		ok   bool
	}{
		{"12419 (prober) S 1 12419 5461 0 -1 4194304 101 0 0 0 417 19 0 0 20 0 9 0 2255841 3133440 416", 4360 * time.Millisecond, true},
		{"12420 (a) b) (c) R 1 12419 5461 0 -1 4194304 101 0 0 0 3 2 0 0 20 0 1 0 2255841 3133440 416", 50 * time.Millisecond, true},
		{"12421 (prober) S 1 12419", 0, false},
		{"12422 prober S 1 12419 5461 0 -1 4194304 101 0 0 0 3 2 0 0", 0, false},
		{"12423 (prober) S 1 12419 5461 0 -1 4194304 101 0 0 0 x 2 0 0", 0, false},
	}
	for _, tc := range cases {
		got, err := parseStatCPU(tc.stat)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseStatCPU(%q) = %v, %v; want %v, ok %v", tc.stat, got, err, tc.want, tc.ok)
		}
	}
	// And this process's own: a running Go program holds more than a MiB.
	self, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.RSS < 1<<20 || self.PeakRSS < self.RSS || self.Anon == 0 || self.File == 0 || self.Anon+self.File > self.RSS {
		t.Errorf("this process: %+v", self)
	}
}
