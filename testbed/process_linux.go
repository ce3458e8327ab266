package testbed

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

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
