//go:build !linux

package lab

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"time"
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

// SetSysctl needs Linux.
func SetSysctl(ns, key, value string) error { return errors.ErrUnsupported }

// Command needs Linux.
func (f *Fabric) Command(ctx context.Context, ns, name string, args ...string) (*exec.Cmd, error) {
	return nil, errors.ErrUnsupported
}

// Start needs Linux.
func Start(cmd *exec.Cmd) error { return errors.ErrUnsupported }

// DialContext needs Linux: its dial function always fails.
func DialContext(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(context.Context, string, string) (net.Conn, error) { return nil, errors.ErrUnsupported }
}

// HTTPClient needs Linux: its requests always fail.
func HTTPClient(ns string, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil, DialContext: DialContext(ns)}}
}

// Inject needs Linux.
func (f *Fabric) Inject(ctx context.Context, ft Fault) error { return errors.ErrUnsupported }

// Clear needs Linux.
func (f *Fabric) Clear(ctx context.Context) error { return errors.ErrUnsupported }

// Hold needs Linux: there is never a delay to hold.
func (f *Fabric) Hold(ctx context.Context) error { return errors.ErrUnsupported }

// Silence is Linux only.
func (f *Fabric) Silence(router string) error { return errors.ErrUnsupported }

// delayer holds a delay fault's packets, on Linux only.
type delayer struct{}
