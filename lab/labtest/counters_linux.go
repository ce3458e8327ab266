package labtest

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

var chainSeq atomic.Uint32

// SourcePortCounters installs, in namespace ns (a router's, typically), a
// forward chain with one counting rule per TCP source port, and returns a
// function that reads how many segments with each port the router
// forwarded: which spine a flow took, measured rather than assumed. It
// counts IPv4 and IPv6 alike: give each family ports of its own to tell
// them apart. The table (inet labtest) goes with the namespace.
func SourcePortCounters(t testing.TB, ns string, sports []uint16) func() map[uint16]uint64 {
	t.Helper()
	fd, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatalf("counters: netns %s: %v", ns, err)
	}
	t.Cleanup(func() { fd.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(fd)))
	if err != nil {
		t.Fatalf("counters: nftables in %s: %v", ns, err)
	}
	tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "labtest"})
	ch := c.AddChain(&nftables.Chain{Table: tbl, Name: fmt.Sprintf("count%d", chainSeq.Add(1)), Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
	for _, p := range sports {
		c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(p)},
			&expr.Counter{},
		}})
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("counters in %s: %v", ns, err)
	}
	return func() map[uint16]uint64 {
		rules, err := c.GetRules(tbl, ch)
		if err != nil {
			t.Fatalf("read counters in %s: %v", ns, err)
		}
		got := map[uint16]uint64{}
		for i, r := range rules {
			for _, e := range r.Exprs {
				if ctr, ok := e.(*expr.Counter); ok && i < len(sports) {
					got[sports[i]] = ctr.Packets
				}
			}
		}
		return got
	}
}

// UDPDestPortCounter installs, in namespace ns, a forward chain counting
// the UDP datagrams to port dport the router forwards (an overlay's
// encapsulated packets: VXLAN's 8472), and returns a function that reads
// the count. The table (inet labtest) goes with the namespace.
func UDPDestPortCounter(t testing.TB, ns string, dport uint16) func() uint64 {
	t.Helper()
	fd, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatalf("counters: netns %s: %v", ns, err)
	}
	t.Cleanup(func() { fd.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(fd)))
	if err != nil {
		t.Fatalf("counters: nftables in %s: %v", ns, err)
	}
	tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "labtest"})
	ch := c.AddChain(&nftables.Chain{Table: tbl, Name: fmt.Sprintf("count%d", chainSeq.Add(1)), Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(dport)},
		&expr.Counter{},
	}})
	if err := c.Flush(); err != nil {
		t.Fatalf("counters in %s: %v", ns, err)
	}
	return func() uint64 {
		rules, err := c.GetRules(tbl, ch)
		if err != nil {
			t.Fatalf("read counters in %s: %v", ns, err)
		}
		for _, r := range rules {
			for _, e := range r.Exprs {
				if ctr, ok := e.(*expr.Counter); ok {
					return ctr.Packets
				}
			}
		}
		return 0
	}
}
