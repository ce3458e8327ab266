package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"

	"golang.org/x/sync/errgroup"

	"github.com/netprober/prober/buildinfo"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/hub"
	"github.com/netprober/prober/peers"
)

// newMatrixDiscovery prepares discovery: kubernetes for the matrix, nil
// for static agents. The matrix is prober's only API client: it watches
// Nodes, the agents' Pods, Services and the probed Services'
// EndpointSlices, and plans who probes whom.
// With kubernetes.nodeConditions, the reporter that writes them (nil
// otherwise).
func newMatrixDiscovery(cfg *config.Matrix, log *slog.Logger) (*peers.Discovery, *peers.Reporter, error) {
	if !cfg.KubernetesDiscovery() {
		return nil, nil, nil
	}
	k := cfg.Kubernetes
	peers.LogThrough(log)
	client, err := peers.NewClient(k.Kubeconfig, buildinfo.UserAgent("matrix"))
	if err != nil {
		return nil, nil, err
	}
	d, err := peers.New(client, peers.MatrixConfig(k), log)
	if err != nil || !k.WritesNodeConditions() {
		return d, nil, err
	}
	host, _ := os.Hostname() // a pod's name: the Events' reporting instance, the Lease's holder
	host = cmp.Or(host, "prober-matrix")
	rep := peers.NewReporter(client, peers.ReporterConfig{WritesPerMinute: k.NodeConditions.WritesPerMinute, Instance: host,
		Election: &peers.Election{Namespace: k.Namespace, Identity: host}}, log)
	return d, rep, nil
}

// runMatrixWithDiscovery runs the hub; with discovery, each snapshot
// replaces the plan and the agents it pulls, and tells rep (when set)
// which peers are Nodes.
func runMatrixWithDiscovery(ctx context.Context, h *hub.Hub, d *peers.Discovery, rep *peers.Reporter, log *slog.Logger) error {
	if d == nil {
		return h.Run(ctx)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return h.Run(gctx) })
	if rep != nil {
		g.Go(func() error { return rep.Run(gctx) })
	}
	g.Go(func() error {
		err := d.Run(gctx, func(ps []peers.Peer) {
			plan, agents := peers.Plan(ps)
			log.Info("peers from discovery", "peers", len(ps), "agents", len(agents))
			h.SetPeers(plan, agents)
			if rep != nil {
				rep.SetPeers(ps)
			}
		})
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
