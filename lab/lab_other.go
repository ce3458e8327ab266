//go:build !linux

package lab

import (
	"context"
	"errors"
	"log/slog"
	"os/exec"
)

// ErrPrivilege is what NeedNetAdmin wraps when the process may not build
// a lab.
var ErrPrivilege = errors.New("the lab needs Linux and root")

// NeedNetAdmin reports that the lab needs Linux.
func NeedNetAdmin() error { return errors.ErrUnsupported }

// Up needs Linux.
func Up(ctx context.Context, spec Spec, logger *slog.Logger) (*Fabric, error) {
	return nil, errors.ErrUnsupported
}

// Down needs Linux.
func Down(prefix string) error { return errors.ErrUnsupported }

// Do needs Linux.
func Do(ns string, fn func() error) error { return errors.ErrUnsupported }

// Sysctl needs Linux.
func Sysctl(ns, key string) (string, error) { return "", errors.ErrUnsupported }

// Command needs Linux.
func (f *Fabric) Command(ctx context.Context, ns, name string, args ...string) (*exec.Cmd, error) {
	return nil, errors.ErrUnsupported
}

// Start needs Linux.
func Start(cmd *exec.Cmd) error { return errors.ErrUnsupported }
