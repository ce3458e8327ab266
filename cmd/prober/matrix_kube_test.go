package main

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/netprober/prober/peers"
)

func TestAgentURLs(t *testing.T) {
	t.Parallel()
	// RFC 5737 addresses: nothing is dialled.
	ps := []peers.Peer{
		{Name: "n1", Class: peers.ClassNode, Addr: netip.MustParseAddr("192.0.2.1"), Port: 9808, Agent: true},
		{Name: "n2", Class: peers.ClassNode, Addr: netip.MustParseAddr("192.0.2.2"), Port: 9808},
		{Name: "prober-pod-x", Class: peers.ClassPod, Addr: netip.MustParseAddr("198.51.100.7"), Port: 9808, Agent: true},
		{Name: "default/kubernetes", Class: peers.ClassLB, Addr: netip.MustParseAddr("203.0.113.1"), Port: 443, Agent: true},
	}
	got := agentURLs(ps)
	want := []string{"http://192.0.2.1:9808", "http://198.51.100.7:9808"}
	if !slices.Equal(got, want) {
		t.Errorf("agentURLs = %v, want %v (agents on nodes and pods only, not LBs or agentless nodes)", got, want)
	}
}
