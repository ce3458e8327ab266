package matrix

import "net/netip"

// NewHopNamer returns what names an address by cfg.Hops, as the matrix
// names its suspects: the device of the longest prefix covering it, ""
// when none does. Reports of a single trace (`prober trace`, the page's
// trace on demand) name their hops with it. Entries Config.Check would
// refuse are skipped.
func NewHopNamer(cfg Config) func(netip.Addr) string {
	t := parseHops(cfg.Hops, func(string, string, ...any) {})
	return t.lookup
}
