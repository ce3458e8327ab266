package main

import (
	"context"
	"log/slog"
	"net/netip"

	"github.com/netprober/prober/agent"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/hub"
	"github.com/netprober/prober/peers"
)

// newMatrixDiscovery prepares discovery: kubernetes for the matrix, nil
// for static agents. The matrix watches the same objects as the agents:
// Nodes with a Ready node agent (hostNetwork, at the node's address) and
// Ready pods of the pod DaemonSet.
func newMatrixDiscovery(cfg *config.Matrix, log *slog.Logger) (*peers.Discovery, error) {
	if !cfg.KubernetesDiscovery() {
		return nil, nil
	}
	k := cfg.Kubernetes
	client, err := peers.NewClient(k.Kubeconfig, "prober-matrix/"+agent.Version)
	if err != nil {
		return nil, err
	}
	pc := peersConfig(k)
	// LBs are targets, not agents: no Service or EndpointSlice watch.
	pc.APIServerLB, pc.AgentsOnly = netip.AddrPort{}, true
	return peers.New(client, pc, log)
}

// agentURLs are the base URLs of the agents in a peer snapshot: node and
// pod peers on which a Ready agent runs. LB peers are targets, not agents.
func agentURLs(ps []peers.Peer) []string {
	var urls []string
	for _, p := range ps {
		if !p.Agent || (p.Class != peers.ClassNode && p.Class != peers.ClassPod) {
			continue
		}
		urls = append(urls, "http://"+netip.AddrPortFrom(p.Addr, p.Port).String())
	}
	return urls
}

// runMatrixWithDiscovery runs the hub; with discovery, each snapshot
// replaces the agents it pulls.
func runMatrixWithDiscovery(ctx context.Context, h *hub.Hub, d *peers.Discovery, log *slog.Logger) error {
	return runDiscovering(ctx, h.Run, d, func(_ context.Context, ps []peers.Peer) {
		urls := agentURLs(ps)
		log.Info("agents from discovery", "peers", len(ps), "agents", len(urls))
		h.SetAgents(urls)
	})
}
