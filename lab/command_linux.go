package lab

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
)

// nsGuard sits in a lab Cmd's Err field until Start clears it: a plain
// cmd.Start (or Run, Output) then fails, and spends the Cmd, instead of
// running the program in the caller's namespace, where its packets to
// 198.18.0.0/15 could follow the machine's default route out.
type nsGuard struct{ ns string }

func (g *nsGuard) Error() string {
	return fmt.Sprintf("lab: command for namespace %s: start it with lab.Start, not cmd.Start", g.ns)
}

// Command returns a Cmd that runs name in the namespace of the host or
// router called ns ("n21", "spine1"; a namespace name such as "plab-n21"
// works too). Set its fields as usual, then start it with Start: Go's
// exec.Cmd has no hook to enter a namespace between fork and exec, so the
// namespace must be the starting thread's own.
func (f *Fabric) Command(ctx context.Context, ns, name string, args ...string) (*exec.Cmd, error) {
	target, err := f.Namespace(ns)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, name, args...)
	if cmd.Err != nil {
		return nil, fmt.Errorf("lab command %s: %w", name, cmd.Err)
	}
	cmd.Err = &nsGuard{ns: target}
	return cmd, nil
}

// Start starts a Cmd made by Command inside its namespace: on a thread
// locked and moved into the namespace, whose fork the child inherits.
func Start(cmd *exec.Cmd) error {
	var g *nsGuard
	if !errors.As(cmd.Err, &g) {
		return errors.New("lab: Start takes a Cmd made by Fabric.Command")
	}
	cmd.Err = nil
	return Do(g.ns, cmd.Start)
}
