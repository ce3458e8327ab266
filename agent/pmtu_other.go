//go:build !linux

package agent

import "net/netip"

// routeMTU needs Linux's netlink: elsewhere probing.pmtu.size must be set.
func routeMTU(src, dst netip.Addr) int { return 0 }
