// Command pause is the sandbox ("pause") container of the pods on the
// real-cluster harness's nodes: it holds the pod's namespaces, reaps the
// children a shared PID namespace hands it, and exits on SIGTERM or
// SIGINT. The harness builds it from this checkout, so the cluster needs
// no registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			// Reap every exited child; -1 waits for any of them.
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
