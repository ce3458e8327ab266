package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/netprober/prober/agent"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/peers"
	"github.com/netprober/prober/plan"
	"github.com/netprober/prober/probe"
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
	pc := peersConfig(k)
	// Node agents ping the API server over TLS through the kubernetes
	// Service (and apiServerLB), one connection each, from where their
	// node's kubelet holds its own (seed 001). Pod agents do not, so
	// prober adds one connection per node to the API server, not two
	// (seed 003); they probe those VIPs with tcp_syn.
	if cfg.Class == config.ClassNode && slices.Contains(cfg.Probing.Protocols, probe.ProtocolHTTP2Ping) {
		if err := k.CheckAPIServerCA(); err != nil {
			return nil, err
		}
		pc.APIServerHTTP2, pc.APIServerCAFile = true, k.APIServerCA()
	}
	client, err := peers.NewClient(k.Kubeconfig, "prober-agent/"+agent.Version+" ("+cfg.Name+")")
	if err != nil {
		return nil, err
	}
	return peers.New(client, pc, log)
}

// peersConfig is discovery's config from a kubernetes block.
func peersConfig(k *config.Kubernetes) peers.Config {
	return peers.Config{
		Namespace:         k.Namespace,
		NodeAgentSelector: k.NodeAgentSelector,
		PodAgentSelector:  k.PodAgentSelector,
		RackLabel:         k.RackLabel,
		AgentPort:         uint16(k.AgentPort),
		APIServerLB:       k.APIServerLBAddr(),
	}
}

// runWithDiscovery probes until ctx ends; with discovery, every peer snapshot
// replaces the agent's targets.
func runWithDiscovery(ctx context.Context, a *agent.Agent, d *peers.Discovery, cfg *config.Agent, log *slog.Logger) error {
	return runDiscovering(ctx, a.Run, d, func(ctx context.Context, ps []peers.Peer) {
		a.SetLabels(ownLabels(cfg.Labels, ps))
		ts := planTargets(cfg.Name, cfg.Class, cfg.Labels[peers.LabelNode], cfg.SourceAddr(), ps, cfg.Probing.MaxTargets)
		log.Info("targets from discovery", "peers", len(ps), "targets", len(ts))
		if err := a.SetTargets(ctx, ts); err != nil {
			log.Warn("targets", "err", err)
		}
	})
}

// ownLabels is the agent's configured labels plus the zone and rack of its
// node as discovery sees it: the matrix groups agents by them (the tier
// stage and per-rack views need them), and only the Node object has them.
// Configured labels win.
func ownLabels(configured map[string]string, ps []peers.Peer) map[string]string {
	out := maps.Clone(configured)
	for _, p := range ps {
		if p.Class != peers.ClassNode || p.Name != configured[peers.LabelNode] {
			continue
		}
		for _, k := range []string{peers.LabelZone, peers.LabelRack} {
			if v := p.Labels[k]; v != "" && out[k] == "" {
				out[k] = v
			}
		}
	}
	return out
}

// runDiscovering runs run until ctx ends and, with discovery (d not nil),
// hands it every peer snapshot through emit.
func runDiscovering(ctx context.Context, run func(context.Context) error, d *peers.Discovery, emit func(context.Context, []peers.Peer)) error {
	if d == nil {
		return run(ctx)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return run(gctx) })
	g.Go(func() error {
		err := d.Run(gctx, func(ps []peers.Peer) { emit(gctx, ps) })
		if gctx.Err() != nil {
			return nil // shutting down, not a discovery failure
		}
		if err != nil {
			return fmt.Errorf("discovery: %w", err)
		}
		return nil
	})
	return g.Wait()
}

// planTargets is the agent's share of the Pingmesh-style probe plan
// (package plan) over a peer snapshot: every LB, every node of its own rack
// and node i of every other rack (node->node, node->LB); a pod agent also
// plans over the pods the same way (pod->pod), besides the nodes
// (pod->node, its own node included). Every agent computes the same plan from the same snapshot,
// whatever its order. The agent itself is left out by name or address (a
// node agent's own Node, a pod agent's own Pod); at most max targets, LBs
// first.
func planTargets(self, class, node string, src netip.Addr, ps []peers.Peer, max int) []agent.Target {
	group := func(p peers.Peer) string { return cmp.Or(p.Labels[peers.LabelRack], p.Labels[peers.LabelZone]) }
	byName := map[string]peers.Peer{}
	var nodesAndLBs, pods []plan.Peer
	rack := ""
	for _, p := range ps {
		if p.Class == peers.ClassNode && p.Name == node {
			rack = group(p)
		}
		if p.Name == self || p.Addr == src {
			continue
		}
		byName[p.Name] = p
		pp := plan.Peer{Name: p.Name, Address: p.Addr.String(), Class: p.Class, Group: group(p)}
		if p.Class == peers.ClassPod {
			pods = append(pods, pp)
		} else {
			nodesAndLBs = append(nodesAndLBs, pp)
		}
	}
	me := plan.Peer{Name: self, Class: class, Group: rack}
	var chosen []plan.Peer
	if class == config.ClassPod {
		// Nodes as seen from the pod's node (its index in the rack picks
		// node i elsewhere), then the pod's own node, then the pods.
		chosen = plan.Plan(plan.Peer{Name: node, Class: class, Group: rack}, nodesAndLBs, plan.Options{})
		if own, ok := byName[node]; ok {
			chosen = append(chosen, plan.Peer{Name: own.Name})
		}
		chosen = append(chosen, plan.Plan(me, pods, plan.Options{})...)
	} else {
		chosen = plan.Plan(me, nodesAndLBs, plan.Options{})
	}
	out := make([]agent.Target, 0, min(max, len(chosen)))
	for _, c := range chosen[:min(max, len(chosen))] {
		p := byName[c.Name]
		out = append(out, agent.Target{Name: p.Name, Addr: p.Addr, Class: p.Class, Port: p.Port, Labels: p.Labels, Backends: p.Backends,
			HTTP2: agent.HTTP2{Mode: p.HTTP2.Mode, CAFile: p.HTTP2.CAFile, ServerName: p.HTTP2.ServerName, InsecureSkipVerify: p.HTTP2.InsecureSkipVerify}})
	}
	return out
}
