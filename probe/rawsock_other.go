//go:build !linux

package probe

import (
	"errors"
	"net"
	"net/netip"
	"time"
)

var errClosed = net.ErrClosed

type rawSocket interface {
	send(pkt []byte, dst netip.Addr) error
	recv(buf []byte) (int, time.Time, error)
	reserve(port uint16) error
	close()
}

func openTCPRaw(netip.Addr, uint16, uint16) (rawSocket, error) { return nil, errors.ErrUnsupported }
