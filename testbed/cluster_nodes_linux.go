package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// kubeNode is the part of a Node object the harness reads.
type kubeNode struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		PodCIDR string `json:"podCIDR"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

func (n kubeNode) ready() string {
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status
		}
	}
	return ""
}

// Nodes returns each Node's Ready condition ("True", "False", "Unknown",
// "" before the kubelet reported), by name.
func (c *Cluster) Nodes(ctx context.Context) (map[string]string, error) {
	ns, err := c.getNodes(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, n := range ns {
		out[n.Metadata.Name] = n.ready()
	}
	return out, nil
}

func (c *Cluster) getNodes(ctx context.Context) ([]kubeNode, error) {
	out, err := c.Kubectl(ctx, "get", "nodes", "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []kubeNode `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("kubectl get nodes: %w", err)
	}
	return list.Items, nil
}

// waitNodesReady gives each registered Node the pod CIDRs the fabric
// routes to it (no controller allocates them: the fabric's plan does), and
// waits until every node is Ready.
func (c *Cluster) waitNodesReady(ctx context.Context) error {
	want := map[string][]string{}
	for _, h := range c.Fabric.Nodes() {
		want[h.Name] = c.perFamily(h.PodCIDR, h.PodCIDR6)
	}
	const within = 3 * time.Minute
	deadline := time.Now().Add(within)
	reported := map[string]bool{}
	for {
		nodes, err := c.getNodes(ctx)
		if err != nil && time.Now().After(deadline) {
			return err
		}
		ready := 0
		for _, n := range nodes {
			name := n.Metadata.Name
			cidrs, ours := want[name]
			if !ours {
				continue
			}
			if n.Spec.PodCIDR == "" {
				list, _ := json.Marshal(cidrs)
				patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":%s}}`, cidrs[0], list)
				if _, err := c.Kubectl(ctx, "patch", "node", name, "-p", patch); err != nil {
					return err
				}
				continue
			}
			if n.ready() == "True" {
				ready++
				if !reported[name] {
					reported[name] = true
					fmt.Fprintf(c.out, "    %s Ready, pod CIDRs %s\n", name, strings.Join(cidrs, ", "))
				}
			}
		}
		if ready == len(want) {
			return nil
		}
		if time.Now().After(deadline) {
			var missing []string
			for name := range want {
				if !reported[name] {
					missing = append(missing, name)
				}
			}
			slices.Sort(missing)
			return fmt.Errorf("nodes not Ready after %v: %s; see %s", within, strings.Join(missing, ", "), c.LogPath(missing[0], "kubelet"))
		}
		for _, n := range c.nodes {
			for _, p := range n.procs {
				if err := p.exited(); err != nil {
					return p.failure(err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// WaitRollout waits until every DaemonSet and Deployment in namespace
// has all its pods Ready, printing each pod as it becomes Ready: what a
// person watching a fresh install wants to see.
func (c *Cluster) WaitRollout(ctx context.Context, namespace string, within time.Duration) error {
	deadline := time.Now().Add(within)
	seen := map[string]bool{}
	for {
		pending, err := c.rollout(ctx, namespace, seen)
		if err == nil && pending == "" {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New(pending)
			}
			return fmt.Errorf("rollout in %s not done after %v: %w", namespace, within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// rollout prints the pods of namespace that became Ready since seen and
// says what is still pending ("" when nothing).
func (c *Cluster) rollout(ctx context.Context, namespace string, seen map[string]bool) (string, error) {
	out, err := c.Kubectl(ctx, "-n", namespace, "get", "pods,daemonsets,deployments", "-o", "json")
	if err != nil {
		return "", err
	}
	var list struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				NodeName string `json:"nodeName"`
				Replicas *int   `json:"replicas"`
			} `json:"spec"`
			Status struct {
				PodIP      string `json:"podIP"`
				Conditions []struct {
					Type, Status string
				} `json:"conditions"`
				DesiredNumberScheduled int `json:"desiredNumberScheduled"`
				NumberReady            int `json:"numberReady"`
				UpdatedNumberScheduled int `json:"updatedNumberScheduled"`
				ReadyReplicas          int `json:"readyReplicas"`
				UpdatedReplicas        int `json:"updatedReplicas"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return "", fmt.Errorf("kubectl get: %w", err)
	}
	var pending []string
	for _, it := range list.Items {
		st := it.Status
		switch it.Kind {
		case "Pod":
			for _, cond := range st.Conditions {
				if cond.Type == "Ready" && cond.Status == "True" && !seen[it.Metadata.Name] {
					seen[it.Metadata.Name] = true
					fmt.Fprintf(c.out, "    %s Ready on %s (%s)\n", it.Metadata.Name, it.Spec.NodeName, st.PodIP)
				}
			}
		case "DaemonSet":
			if st.DesiredNumberScheduled == 0 || st.NumberReady < st.DesiredNumberScheduled || st.UpdatedNumberScheduled < st.DesiredNumberScheduled {
				pending = append(pending, fmt.Sprintf("daemonset/%s %d/%d ready", it.Metadata.Name, st.NumberReady, st.DesiredNumberScheduled))
			}
		case "Deployment":
			want := 1
			if it.Spec.Replicas != nil {
				want = *it.Spec.Replicas
			}
			if st.ReadyReplicas < want || st.UpdatedReplicas < want {
				pending = append(pending, fmt.Sprintf("deployment/%s %d/%d ready", it.Metadata.Name, st.ReadyReplicas, want))
			}
		}
	}
	return strings.Join(pending, ", "), nil
}
