//go:build !linux

package probe

import "syscall"

// reuseAddr is Linux's alone; elsewhere a DNS flow's TCP probe binds its
// port as the kernel allows.
func reuseAddr(_, _ string, _ syscall.RawConn) error { return nil }
