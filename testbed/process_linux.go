package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

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
	cmd.WaitDelay = stopGrace
	if err := lab.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	p := &Process{name: s.Name, log: logPath, cmd: cmd, done: make(chan struct{})}
	// One waiter from the start: the program is reaped whenever it
	// exits, and waits for it can tell "exited" from "not serving yet".
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}
