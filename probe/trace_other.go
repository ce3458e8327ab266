//go:build !linux

package probe

import (
	"errors"
	"net/netip"
)

func openICMPRaw(netip.Addr) (rawSocket, error) { return nil, errors.ErrUnsupported }
