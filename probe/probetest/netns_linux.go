package probetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
)

// envPrivate marks the test process Main re-executed in its own network
// namespace.
const envPrivate = "PROBER_TEST_PRIVATE_NETNS"

// Main runs a package's tests. As root it runs them in a network namespace
// of their own, with only a loopback: the raw sockets, reserved source
// ports and listeners of the tests then never meet the machine's own
// (an agent running on the same machine made a fixed source-port range
// fail), and nothing they send can leave. Not root, the tests run as they
// are (the root-only ones skip).
func Main(m *testing.M) {
	if os.Getenv(envPrivate) != "" {
		if err := loopbackUp(); err != nil {
			fmt.Fprintf(os.Stderr, "probetest: the private network namespace's loopback: %v\n", err)
			os.Exit(1)
		}
		os.Exit(m.Run())
	}
	if os.Geteuid() != 0 {
		os.Exit(m.Run())
	}
	os.Exit(rerun())
}

// rerun runs this test binary again in a new network namespace and
// returns its exit code. The child dies with this process, and the
// signals go test sends (interrupt, timeout) reach it.
func rerun() int {
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envPrivate+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "probetest: running the tests in a private network namespace: %v\n", err)
		return 1
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if code := ee.ExitCode(); code > 0 {
			return code
		}
		return 1 // killed by a signal
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "probetest: %v\n", err)
		return 1
	}
	return 0
}

func loopbackUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(lo)
}
