package peerstest

import "syscall"

// procAttr kills a child when the test binary dies (a panic, a timeout), so
// no etcd or kube-apiserver outlives its test.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
