package testbed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netprober/prober/lab"
)

// StartProcess starts s.Path in the namespace of s.Host, its output in
// s.Dir/s.Name.log. Cancelling ctx stops it as Close does.
func StartProcess(ctx context.Context, f *lab.Fabric, s ProcessSpec) (*Process, error) {
	logPath := filepath.Join(s.Dir, s.Name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd, err := f.Command(ctx, s.Host, s.Path, s.Args...)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	grace := cmp.Or(s.StopGrace, stopGrace)
	cmd.WaitDelay = grace
	// Pdeathsig: the program dies with this process even when it cannot
	// clean up (a test binary's timeout panic).
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if s.MountNS {
		// Go makes / recursively private in the child before exec.
		attr.Unshareflags = syscall.CLONE_NEWNS
	}
	if s.Cgroup != "" {
		fd, err := unix.Open(s.Cgroup, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: cgroup %s: %w", s.Name, s.Cgroup, err)
		}
		defer unix.Close(fd)
		attr.UseCgroupFD, attr.CgroupFD = true, fd
	}
	cmd.SysProcAttr = attr
	if err := lab.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	p := &Process{name: s.Name, log: logPath, grace: grace, cmd: cmd, done: make(chan struct{})}
	// One waiter from the start: the program is reaped whenever it
	// exits, and waits for it can tell "exited" from "not serving yet".
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Usage reads the program's resident memory and CPU time from
// /proc/<pid>/status and /proc/<pid>/stat.
func (p *Process) Usage() (Usage, error) {
	u, err := readUsage(p.Pid())
	if err != nil {
		return u, fmt.Errorf("%s: %w", p.name, err)
	}
	return u, nil
}

// userHZ is the unit of /proc/<pid>/stat's times: USER_HZ, 100 on every
// architecture Linux builds Go for (sysconf(_SC_CLK_TCK)).
const userHZ = 100

func readUsage(pid int) (Usage, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, err
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, err
	}
	u, err := parseStatus(string(status))
	if err != nil {
		return u, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	if u.CPU, err = parseStatCPU(string(stat)); err != nil {
		return u, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return u, nil
}

// parseStatus reads VmRSS, VmHWM, RssAnon and RssFile from
// /proc/<pid>/status.
func parseStatus(status string) (Usage, error) {
	var u Usage
	for line := range strings.Lines(status) {
		key, val, ok := strings.Cut(line, ":")
		var field *uint64
		switch key {
		case "VmRSS":
			field = &u.RSS
		case "VmHWM":
			field = &u.PeakRSS
		case "RssAnon":
			field = &u.Anon
		case "RssFile":
			field = &u.File
		}
		if !ok || field == nil {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return u, fmt.Errorf("%s: %w", key, err)
		}
		*field = kb << 10
	}
	if u.RSS == 0 || u.PeakRSS == 0 {
		return u, errors.New("no VmRSS or VmHWM (a kernel thread, or a zombie)")
	}
	return u, nil
}

// parseStatCPU returns utime + stime from /proc/<pid>/stat.
func parseStatCPU(stat string) (time.Duration, error) {
	// The command name, field 2, is in parentheses and may hold spaces
	// and parentheses itself: count fields from the last ')'. utime and
	// stime are fields 14 and 15, the 12th and 13th after it.
	i := strings.LastIndexByte(stat, ')')
	var f []string
	if i >= 0 {
		f = strings.Fields(stat[i+1:])
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("%q: too few fields", stat)
	}
	var ticks uint64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
