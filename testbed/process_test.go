package testbed

import "testing"

// TestWaiting reads a goroutine dump as SIGQUIT prints it: each
// goroutine's state and innermost function of ours, counted alike; a
// goroutine with none of ours is left out.
func TestWaiting(t *testing.T) {
	t.Parallel()
	dump := `{"level":"INFO","msg":"agent started"}
SIGQUIT: quit
PC=0x47a1c1 m=0 sigcode=0

goroutine 1 [semacquire, 3 minutes]:
sync.runtime_Semacquire(0xc000123)
	/usr/lib/go/src/runtime/sema.go:71 +0x25
sync.(*WaitGroup).Wait(0xc000124)
	/usr/lib/go/src/sync/waitgroup.go:118 +0x48
github.com/netprober/prober/agent.(*Agent).stopProbes(0xc000010000)
	/src/agent/schedule.go:90 +0x25
github.com/netprober/prober/agent.(*Agent).Run.func5()
	/src/agent/agent.go:289 +0x2b

goroutine 7 [syscall]:
syscall.Syscall6(0x2d, 0x7)
	/usr/lib/go/src/syscall/syscall_linux.go:91 +0x39
github.com/vishvananda/netlink/nl.(*NetlinkSocket).Receive(0xc0001)
	/mod/nl/nl_linux.go:800 +0x1
github.com/netprober/prober/probe.(*routeMTU).get(0xc0002, {0x1})
	/src/probe/pmtu_linux.go:50 +0x1
github.com/netprober/prober/probe.(*TCPSYN).probe(0xc0003)
	/src/probe/tcpsyn.go:380 +0x1

goroutine 8 [syscall]:
github.com/netprober/prober/probe.(*routeMTU).get(0xc0002, {0x1})
	/src/probe/pmtu_linux.go:50 +0x1

goroutine 9 [IO wait]:
internal/poll.runtime_pollWait(0x7f)
	/usr/lib/go/src/runtime/netpoll.go:351 +0x85
`
	got := waiting(dump, modulePrefix, 12)
	want := "2 x [syscall] probe.(*routeMTU).get\n1 x [semacquire] agent.(*Agent).stopProbes"
	if got != want {
		t.Errorf("waiting:\n%s\nwant:\n%s", got, want)
	}
	if got := waiting(dump, modulePrefix, 1); got != "2 x [syscall] probe.(*routeMTU).get" {
		t.Errorf("at most one line: %q", got)
	}
	if got := waiting("no dump here\n", modulePrefix, 12); got != "" {
		t.Errorf("a log without a dump: %q", got)
	}
}
