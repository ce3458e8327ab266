package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/netprober/prober/agent"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/peers"
	"github.com/netprober/prober/probe"
	"github.com/netprober/prober/tlsfiles"
)

// planSource prepares an agent in a cluster: nil for static targets. It
// completes the agent's identity from the downward API: the name
// (NODE_NAME for a node agent, POD_NAME for a pod agent, so the two agents
// of a node stay apart in the matrix), the node label, and the source
// address (POD_IP, the node's IP under hostNetwork) when listen is
// unspecified; the targets come from the matrix's plan. The agent holds no
// API credentials and talks to no API server.
func planSource(cfg *config.Agent, getenv func(string) string, log *slog.Logger) (*agent.PlanSource, error) {
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
		srcs := make([]string, len(id.PodIPs))
		for i, a := range id.PodIPs {
			srcs[i] = a.String()
		}
		cfg.Source = strings.Join(srcs, ",") // dual-stack: one per family
	}
	k := cfg.Kubernetes
	// Node agents ping the API server over TLS through its VIPs, as their
	// node's kubelet does (seed 001): the CA must be readable now.
	if cfg.Class == config.ClassNode && slices.Contains(cfg.Probing.Protocols, probe.ProtocolHTTP2Ping) {
		if err := k.CheckAPIServerCA(); err != nil {
			return nil, err
		}
	}
	src := &agent.PlanSource{URL: k.MatrixURL(getenv), APIServerCAFile: k.APIServerCA(), Labels: cfg.Labels, TokenFile: k.TokenFile}
	if k.MatrixCAFile != "" {
		roots, err := tlsfiles.NewRoots(k.MatrixCAFile, func(err error) {
			log.Error("kubernetes.matrixCAFile changed and does not load; the last good CAs verify the matrix", "err", err)
		})
		if err != nil {
			return nil, fmt.Errorf("kubernetes.matrixCAFile: %w", err)
		}
		src.TLS = roots.Config(k.MatrixServerName())
	}
	return src, nil
}

// runAgentWith probes until ctx ends, following the matrix's plan when
// src is set.
func runAgentWith(ctx context.Context, a *agent.Agent, src *agent.PlanSource, log *slog.Logger) error {
	if src == nil {
		return a.Run(ctx)
	}
	log.Info("following the matrix's plan", "matrix", src.URL)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.Run(gctx) })
	g.Go(func() error { return a.Follow(gctx, *src) })
	return g.Wait()
}
