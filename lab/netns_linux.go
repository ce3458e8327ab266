package lab

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

// netnsDir is where `ip netns add` pins named namespaces; pinning ours
// there too lets `ip netns exec plab-n21 ...` enter them.
const netnsDir = "/run/netns"

// Do runs fn on an OS thread inside network namespace ns (a name under
// /run/netns, such as "plab-n21") and returns fn's error. Sockets fn
// opens stay in ns for their whole life, so a listener or connection made
// here may be used from any goroutine afterwards; goroutines fn starts run
// in the caller's namespace, not in ns.
func Do(ns string, fn func() error) error {
	if ns == "" || strings.ContainsRune(ns, '/') {
		return fmt.Errorf("netns %q: not a namespace name", ns)
	}
	target, err := netns.GetFromName(ns)
	if err != nil {
		return fmt.Errorf("netns %s: %w", ns, err)
	}
	defer target.Close()
	return OnLockedThread(func() error {
		if err := netns.Set(target); err != nil {
			return fmt.Errorf("netns %s: enter: %w", ns, err)
		}
		return fn()
	})
}

// OnLockedThread runs fn on a new goroutine locked to its OS thread and
// puts the thread back into its original namespace afterwards. If that
// fails, the goroutine exits still locked, and the Go runtime then
// terminates the thread instead of reusing it in a foreign namespace.
func OnLockedThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("netns: current: %w", err)
			return
		}
		defer orig.Close()
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("netns: restore thread: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// createNS makes a new network namespace pinned at /run/netns/name and
// writes sysctls from inside it: /proc/sys/net belongs to the namespace of
// the thread that opens it, so this must run on the new namespace's thread.
func createNS(name string, sysctls []sysctl) error {
	return OnLockedThread(func() error {
		h, err := netns.NewNamed(name) // leaves this thread in the new namespace
		if err != nil {
			return fmt.Errorf("netns %s: create: %w", name, err)
		}
		h.Close()
		for _, s := range sysctls {
			if err := s.write(); err != nil {
				return fmt.Errorf("netns %s: %w", name, err)
			}
		}
		return nil
	})
}

type sysctl struct {
	key, value string
	optional   bool // absent on some kernels: skip if the file does not exist
}

func (s sysctl) path() string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(s.key, ".", "/"))
}

func (s sysctl) write() error {
	err := os.WriteFile(s.path(), []byte(s.value), 0o644)
	if s.optional && errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", s.key, s.value, err)
	}
	return nil
}

// Sysctl reads a sysctl such as "net.ipv4.ip_forward" inside namespace ns.
func Sysctl(ns, key string) (string, error) {
	var v string
	err := Do(ns, func() error {
		b, err := os.ReadFile(sysctl{key: key}.path())
		v = strings.TrimSpace(string(b))
		return err
	})
	return v, err
}

// SetSysctl writes a sysctl such as "net.ipv4.icmp_ratelimit" inside
// namespace ns.
func SetSysctl(ns, key, value string) error {
	return Do(ns, sysctl{key: key, value: value}.write)
}

// listNS returns the pinned namespaces whose names start with prefix-.
func listNS(prefix string) ([]string, error) {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func deleteNS(name string) error {
	err := netns.DeleteNamed(name)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// A file left without its bind mount (crash between create and mount).
	if rmErr := os.Remove(filepath.Join(netnsDir, name)); rmErr == nil || errors.Is(rmErr, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("netns %s: delete: %w", name, err)
}
