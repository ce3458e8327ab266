//go:build !linux

package probe

import (
	"errors"
	"net/netip"
)

func openTooBigRaw(netip.Addr) (rawSocket, error) { return nil, errors.ErrUnsupported }

// routeMTU reads no path MTU cache off Linux: a sized probe that meets
// a signalling smaller MTU counts as lost.
type routeMTU struct{}

func newRouteMTU() (*routeMTU, error) { return nil, nil }

func (r *routeMTU) get(src, dst netip.Addr) int { return 0 }

func (r *routeMTU) close() {}
