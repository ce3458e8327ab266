package matrix

// SetIPv6ReplySpread sets the selector's IPv6 reply spread for the
// sweep in family_test.go and returns the one it replaced. Not for
// parallel tests: every Localize reads it.
func SetIPv6ReplySpread(v float64) float64 {
	old := ipv6ReplySpread
	ipv6ReplySpread = v
	return old
}
