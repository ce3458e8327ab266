package labtest

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// NoAutoFlowLabel is a net.Dialer or net.ListenConfig Control that turns
// the kernel's automatic IPv6 flow label off on the socket
// (IPV6_AUTOFLOWLABEL): its packets carry label 0 instead of one drawn
// from the connection's random hash. The lab's routers hash the label
// with the 5-tuple, so a 5-tuple then takes the same spine on every
// connection, as an IPv4 one does. On a listener it covers the SYN-ACK
// and the connections it accepts. IPv4 sockets are left alone.
func NoAutoFlowLabel(network, address string, c syscall.RawConn) error {
	if network != "tcp6" && network != "udp6" {
		return nil
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_AUTOFLOWLABEL, 0)
	}); err != nil {
		return err
	}
	return serr
}
