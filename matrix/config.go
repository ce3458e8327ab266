package matrix

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/netprober/prober/api"
)

// Config says how to group, name and judge what the agents report.
type Config struct {
	// GroupBy is "node" or an agent label key such as "rack" or "zone".
	// Snapshot rolls cells up to group x group.
	GroupBy string
	// Hops maps an address or CIDR to a device name, so that suspects
	// name devices ("spine2") rather than addresses. A device usually has
	// several addresses (a router answers a traceroute from the interface
	// facing the sender); map them all to one name. Longest prefix wins.
	Hops map[string]string
	// K is how many worst source-target pairs Snapshot lists.
	K int
	// Window is how long an agent's last report counts (config's
	// window); older reports are "no data", never loss.
	Window time.Duration
	// Cells makes Snapshot list every (source, target, path, protocol)
	// cell besides the group roll-up. Fine at a hundred nodes; at
	// thousands, use the roll-up and Worst.
	Cells      bool
	Thresholds Thresholds
}

// Thresholds are the statistical knobs of Localize. Zero values take
// DefaultThresholds (SetDefaults); Check says each field's range.
type Thresholds struct {
	// Healthy is the highest loss ratio an element (link, device, host,
	// VIP) may have and still count as healthy: the null hypothesis of
	// every significance test. Default 1e-3, where Pingmesh alerts; a
	// healthy fabric runs at 1e-5 to 1e-4.
	Healthy float64
	// Alpha is the p-value below which loss above Healthy is significant.
	// Default 1e-6: a round tests ~10^4 elements, so a false suspect
	// needs a one-in-a-hundred-rounds fluke even before the other gates.
	Alpha float64
	// VoteShare is 007's stopping rule: keep blaming while the top
	// element holds at least this share of the remaining votes.
	// Default 0.05.
	VoteShare float64
	// RackShare is Pingmesh's ToR rule: a rack is symptomatic when at
	// least this share of its nodes have significantly lossy paths.
	// Default 0.5. All racks symptomatic blames the tier above.
	RackShare float64
	// MinSent is the fewest probes an element needs before it can be
	// judged at all. Default 20.
	MinSent uint64
	// MinScore drops suspects that explain less than this share of the
	// round's excess loss: the scatter around a large fault (replies
	// of black-holed flows take paths no trace shows). It can hide a
	// small second fault beside a large one. Default 0.01.
	MinScore float64
	// LatencyMs is the delay, in milliseconds, a flow's median round trip
	// must carry above the round's fastest flow for the flow to count as
	// slow, and the least a latency suspect adds. Default 10: a healthy
	// fabric's medians sit within a millisecond or two of each other,
	// even across zones, and a deep buffer or a slow path adds tens.
	LatencyMs float64
}

// Defaults of Config, for a zero field. config fills the matrix
// process's Config from these (config/matrix.go), so that --check and a
// start see the same values.
const (
	DefaultGroupBy = "node"
	DefaultK       = 20
	DefaultWindow  = time.Minute
	// MaxK bounds K: Snapshot sorts and lists that many pairs each round.
	MaxK = 10000
)

// DefaultThresholds are the Thresholds a zero field takes; each field's
// doc says why.
var DefaultThresholds = Thresholds{
	Healthy:   1e-3,
	Alpha:     1e-6,
	VoteShare: 0.05,
	RackShare: 0.5,
	MinSent:   20,
	MinScore:  0.01,
	LatencyMs: 10,
}

// SetDefaults fills every zero field from DefaultThresholds.
func (t *Thresholds) SetDefaults() {
	d := DefaultThresholds
	t.Healthy = cmp.Or(t.Healthy, d.Healthy)
	t.Alpha = cmp.Or(t.Alpha, d.Alpha)
	t.VoteShare = cmp.Or(t.VoteShare, d.VoteShare)
	t.RackShare = cmp.Or(t.RackShare, d.RackShare)
	t.MinSent = cmp.Or(t.MinSent, d.MinSent)
	t.MinScore = cmp.Or(t.MinScore, d.MinScore)
	t.LatencyMs = cmp.Or(t.LatencyMs, d.LatencyMs)
}

// SetDefaults fills every zero field: GroupBy, K, Window and Thresholds.
func (c *Config) SetDefaults() {
	c.GroupBy = cmp.Or(c.GroupBy, DefaultGroupBy)
	c.K = cmp.Or(c.K, DefaultK)
	c.Window = cmp.Or(c.Window, DefaultWindow)
	c.Thresholds.SetDefaults()
}

// Check reports every field of a defaulted Config that is out of range to
// bad, by its field path: k, window, thresholds.healthy, hops.<key>. It is
// the one definition of the ranges: New calls it, and so does config's
// validation, which maps the paths to the file's (config/matrix.go).
func (c Config) Check(bad func(field, format string, args ...any)) {
	if c.GroupBy == "" {
		bad("groupBy", "empty: node, or an agent label key")
	}
	if c.K < 1 || c.K > MaxK {
		bad("k", "%d not in 1..%d", c.K, MaxK)
	}
	if c.Window <= 0 {
		bad("window", "%s must be positive", c.Window)
	}
	// Written as !(in range) so that NaN is out of range too.
	th := c.Thresholds
	if !(th.Healthy > 0 && th.Healthy < 1) {
		bad("thresholds.healthy", "%v not in (0, 1): a loss ratio", th.Healthy)
	}
	if !(th.Alpha > 0 && th.Alpha < 1) {
		bad("thresholds.alpha", "%v not in (0, 1): a p-value", th.Alpha)
	}
	if !(th.VoteShare > 0 && th.VoteShare <= 1) {
		bad("thresholds.voteShare", "%v not in (0, 1]: a share of the votes", th.VoteShare)
	}
	if !(th.RackShare > 0 && th.RackShare <= 1) {
		bad("thresholds.rackShare", "%v not in (0, 1]: a share of a rack's nodes", th.RackShare)
	}
	if th.MinSent < 1 {
		bad("thresholds.minSent", "%d must be at least 1", th.MinSent)
	}
	if !(th.MinScore > 0 && th.MinScore <= 1) {
		bad("thresholds.minScore", "%v not in (0, 1]: a share of the round's excess loss", th.MinScore)
	}
	if !(th.LatencyMs > 0 && th.LatencyMs <= 1000*api.MaxSeconds) {
		bad("thresholds.latencyMs", "%v not in (0, %d]: milliseconds a slow flow's median round trip adds", th.LatencyMs, 1000*api.MaxSeconds)
	}
	parseHops(c.Hops, bad)
}

// Validate is Check with the problems joined.
func (c Config) Validate() error {
	var errs []error
	c.Check(func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	})
	return errors.Join(errs...)
}

// hopTable resolves addresses to device names by longest prefix.
type hopTable struct {
	// byBits[i] holds the prefixes of length bits[i], longest first.
	bits  []int
	byLen []map[netip.Prefix]string
}

// parseHops builds the table, reporting each bad entry to bad as
// hops.<key>, the path config uses too.
func parseHops(hops map[string]string, bad func(field, format string, args ...any)) hopTable {
	var t hopTable
	idx := map[int]int{}
	keys := make([]string, 0, len(hops))
	for k := range hops {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name := hops[k]
		var p netip.Prefix
		var err error
		if strings.Contains(k, "/") {
			p, err = netip.ParsePrefix(k)
			if err == nil && p != p.Masked() {
				bad("hops."+k, "host bits set (did you mean %s?)", p.Masked())
				continue
			}
		} else {
			var a netip.Addr
			a, err = netip.ParseAddr(k)
			if err == nil {
				a = a.Unmap()
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil {
			bad("hops."+k, "key is neither an address nor a CIDR")
			continue
		}
		if name == "" {
			bad("hops."+k, "device name is empty")
			continue
		}
		i, ok := idx[p.Bits()]
		if !ok {
			i = len(t.bits)
			idx[p.Bits()] = i
			t.bits = append(t.bits, p.Bits())
			t.byLen = append(t.byLen, map[netip.Prefix]string{})
		}
		t.byLen[i][p] = name
	}
	// Longest prefix first.
	order := make([]int, len(t.bits))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return t.bits[b] - t.bits[a] })
	bits := make([]int, len(order))
	byLen := make([]map[netip.Prefix]string, len(order))
	for j, i := range order {
		bits[j], byLen[j] = t.bits[i], t.byLen[i]
	}
	t.bits, t.byLen = bits, byLen
	return t
}

// lookup returns the device name of addr, or "" when no entry covers it.
func (t *hopTable) lookup(addr netip.Addr) string {
	addr = addr.Unmap()
	for i, b := range t.bits {
		if b > addr.BitLen() {
			continue
		}
		p, err := addr.Prefix(b)
		if err != nil {
			continue
		}
		if name, ok := t.byLen[i][p]; ok {
			return name
		}
	}
	return ""
}

// deviceOfAddr names the device that answers from addr: a Hops entry, or
// "" when none covers it (or addr is not an address).
func (m *Matrix) deviceOfAddr(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return ""
	}
	return m.hops.lookup(a)
}
