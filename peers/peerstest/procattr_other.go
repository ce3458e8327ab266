//go:build !linux

package peerstest

import "syscall"

func procAttr() *syscall.SysProcAttr { return nil }
