package probe

import "syscall"

// reuseAddr lets a DNS flow's TCP probe bind its flow's source port
// again while an earlier connection of the flow lingers in the kernel.
func reuseAddr(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
