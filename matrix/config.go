package matrix

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
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
	// MaxAge is how long an agent's last report counts; older reports
	// are "no data", never loss.
	MaxAge time.Duration
	// Cells makes Snapshot list every (source, target, path, protocol)
	// cell besides the group roll-up. Fine at a hundred nodes; at
	// thousands, use the roll-up and Worst.
	Cells      bool
	Thresholds Thresholds
}

// Thresholds are the statistical knobs of Localize. Zero values take the
// defaults documented on each field.
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
}

func (t *Thresholds) setDefaults() {
	if t.Healthy == 0 {
		t.Healthy = 1e-3
	}
	if t.Alpha == 0 {
		t.Alpha = 1e-6
	}
	if t.VoteShare == 0 {
		t.VoteShare = 0.05
	}
	if t.RackShare == 0 {
		t.RackShare = 0.5
	}
	if t.MinSent == 0 {
		t.MinSent = 20
	}
	if t.MinScore == 0 {
		t.MinScore = 0.01
	}
}

// hopTable resolves addresses to device names by longest prefix.
type hopTable struct {
	// byBits[i] holds the prefixes of length bits[i], longest first.
	bits  []int
	byLen []map[netip.Prefix]string
}

func parseHops(hops map[string]string) (hopTable, error) {
	var t hopTable
	var errs []error
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
				errs = append(errs, fmt.Errorf("hops[%q]: host bits set (did you mean %s?)", k, p.Masked()))
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
			errs = append(errs, fmt.Errorf("hops[%q]: not an address or CIDR: %w", k, err))
			continue
		}
		if name == "" {
			errs = append(errs, fmt.Errorf("hops[%q]: empty device name", k))
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
	return t, errors.Join(errs...)
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
