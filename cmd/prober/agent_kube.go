package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/netip"

	"golang.org/x/sync/errgroup"

	"github.com/netprober/prober/agent"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/peers"
)

// newDiscovery prepares discovery: kubernetes, nil for static discovery.
// It first completes the agent's identity from the downward API: the name
// (NODE_NAME for a node agent, POD_NAME for a pod agent, so the two agents
// of a node stay apart in the matrix), the node label, and the source
// address (POD_IP, the node's IP under hostNetwork) when listen is
// unspecified. Nothing talks to the API server yet.
func newDiscovery(cfg *config.Agent, getenv func(string) string, log *slog.Logger) (*peers.Discovery, error) {
	if !cfg.KubernetesDiscovery() {
		return nil, nil
	}
	id, err := peers.IdentityFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("discovery: kubernetes: %w", err)
	}
	if cfg.Name == "" {
		cfg.Name = id.NodeName
		if cfg.Class == config.ClassPod {
			cfg.Name = id.PodName
		}
	}
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	if cfg.Labels[peers.LabelNode] == "" {
		cfg.Labels[peers.LabelNode] = id.NodeName
	}
	if cfg.Source == "" && cfg.SourceAddr().IsUnspecified() {
		cfg.Source = id.PodIP.String()
	}
	k := cfg.Kubernetes
	client, err := peers.NewClient(k.Kubeconfig, "prober-agent/"+agent.Version+" ("+cfg.Name+")")
	if err != nil {
		return nil, err
	}
	return peers.New(client, peers.Config{
		Namespace:         k.Namespace,
		NodeAgentSelector: k.NodeAgentSelector,
		PodAgentSelector:  k.PodAgentSelector,
		RackLabel:         k.RackLabel,
		AgentPort:         uint16(k.AgentPort),
		APIServerLB:       k.APIServerLBAddr(),
	}, log)
}

// runWithDiscovery probes until ctx ends; with discovery, every peer snapshot
// replaces the agent's targets.
func runWithDiscovery(ctx context.Context, a *agent.Agent, d *peers.Discovery, cfg *config.Agent, log *slog.Logger) error {
	if d == nil {
		return a.Run(ctx)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.Run(gctx) })
	g.Go(func() error {
		err := d.Run(gctx, func(ps []peers.Peer) {
			ts := planTargets(cfg.Name, cfg.SourceAddr(), ps, cfg.Probing.MaxTargets)
			log.Info("targets from discovery", "peers", len(ps), "targets", len(ts))
			if err := a.SetTargets(gctx, ts); err != nil {
				log.Warn("targets", "err", err)
			}
		})
		if gctx.Err() != nil {
			return nil // shutting down, not a discovery failure
		}
		return err
	})
	return g.Wait()
}

// planTargets picks at most max targets from a snapshot, leaving out the
// agent itself (by name or by address: a node agent's own Node, a pod
// agent's own Pod). Every LB first, then node and pod peers alternately,
// each list entered at an offset hashed from the agent's name, so that in
// a cluster larger than max the agents spread over the peers instead of
// all probing the alphabetically first ones.
func planTargets(self string, src netip.Addr, ps []peers.Peer, max int) []agent.Target {
	var lbs, nodes, pods []peers.Peer
	for _, p := range ps {
		if p.Name == self || p.Addr == src {
			continue
		}
		switch p.Class {
		case peers.ClassLB:
			lbs = append(lbs, p)
		case peers.ClassNode:
			nodes = append(nodes, p)
		case peers.ClassPod:
			pods = append(pods, p)
		}
	}
	h := fnv.New32a()
	h.Write([]byte(self))
	off := int(h.Sum32() & 0x7fffffff)
	out := make([]agent.Target, 0, min(max, len(lbs)+len(nodes)+len(pods)))
	add := func(p peers.Peer) bool {
		if len(out) >= max {
			return false
		}
		out = append(out, agent.Target{Name: p.Name, Addr: p.Addr, Class: p.Class, Port: p.Port, Labels: p.Labels})
		return true
	}
	for _, p := range lbs {
		add(p)
	}
	for i := 0; i < len(nodes) || i < len(pods); i++ {
		if i < len(nodes) && !add(nodes[(off+i)%len(nodes)]) {
			break
		}
		if i < len(pods) && !add(pods[(off+i)%len(pods)]) {
			break
		}
	}
	return out
}
