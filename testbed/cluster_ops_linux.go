package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netprober/prober/lab"
)

// Apply runs `kubectl apply -f dir` as the admin.
func (c *Cluster) Apply(ctx context.Context, dir string) (string, error) {
	return c.Kubectl(ctx, "apply", "-f", dir)
}

// ServiceAddr returns a Service's ClusterIP and its first port.
func (c *Cluster) ServiceAddr(ctx context.Context, namespace, name string) (netip.AddrPort, error) {
	out, err := c.Kubectl(ctx, "-n", namespace, "get", "service", name, "-o", "json")
	if err != nil {
		return netip.AddrPort{}, err
	}
	var svc struct {
		Spec struct {
			ClusterIP string `json:"clusterIP"`
			Ports     []struct {
				Port uint16 `json:"port"`
			} `json:"ports"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &svc); err != nil {
		return netip.AddrPort{}, fmt.Errorf("service %s/%s: %w", namespace, name, err)
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || len(svc.Spec.Ports) == 0 {
		return netip.AddrPort{}, fmt.Errorf("service %s/%s: no ClusterIP and port", namespace, name)
	}
	return netip.AddrPortFrom(ip, svc.Spec.Ports[0].Port), nil
}

// vantage is the namespace of a node still in the cluster, from where
// Services' ClusterIPs are reached through its kube-proxy.
func (c *Cluster) vantage() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.Fabric.Nodes() {
		if _, ok := c.nodes[h.Name]; ok {
			return h.Namespace, nil
		}
	}
	return "", errors.New("cluster: no node left")
}

// DialContext dials from a node of the cluster, so ClusterIPs and pod IPs
// are reachable (through that node's kube-proxy).
func (c *Cluster) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ns, err := c.vantage()
	if err != nil {
		return nil, err
	}
	return lab.DialContext(ns)(ctx, network, addr)
}

// HTTPClient is an HTTP client whose connections start on a node of the
// cluster (see DialContext).
func (c *Cluster) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil, DialContext: c.DialContext, MaxIdleConnsPerHost: 2}}
}

// Forward serves listen (an address on this machine's loopback) as a
// tunnel to a Service inside the cluster, so a browser on the machine
// can open the matrix page. It stops when ctx ends.
func (c *Cluster) Forward(ctx context.Context, listen, namespace, service string) (net.Addr, error) {
	ap, err := netip.ParseAddrPort(listen)
	if err != nil || !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("forward: %q is not a loopback address:port", listen)
	}
	to, err := c.ServiceAddr(ctx, namespace, service)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { ln.Close() })
	go func() {
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer in.Close()
				dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				out, err := c.DialContext(dctx, "tcp", to.String())
				cancel()
				if err != nil {
					return
				}
				defer out.Close()
				stop := context.AfterFunc(ctx, func() { in.Close(); out.Close() })
				defer stop()
				go func() { io.Copy(out, in); out.(*net.TCPConn).CloseWrite() }()
				io.Copy(in, out)
			}()
		}
	}()
	return ln.Addr(), nil
}

// RemoveNode takes a node out of the cluster as an operator does: drain
// it (its DaemonSet pods stay), delete its Node, and grace after the API
// server no longer has it, power it off: its daemons and containers stop.
// The node's namespace stays on the fabric, a machine out of the cluster.
func (c *Cluster) RemoveNode(ctx context.Context, name string, grace time.Duration) error {
	c.mu.Lock()
	n, ok := c.nodes[name]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("cluster: no node %q (have %s)", name, strings.Join(c.nodeNames(), ", "))
	}
	if out, err := c.Kubectl(ctx, "drain", name, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=90s"); err != nil {
		return fmt.Errorf("drain %s: %w: %s", name, err, out)
	}
	if out, err := c.Kubectl(ctx, "delete", "node", name, "--wait=true", "--timeout=60s"); err != nil {
		return fmt.Errorf("delete node %s: %w: %s", name, err, out)
	}
	c.mu.Lock()
	delete(c.nodes, name)
	c.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(grace):
	}
	return n.powerOff()
}

func (c *Cluster) nodeNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for name := range c.nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// LogPath is the log file of a cluster daemon: component is "kubelet",
// "containerd", "kube-proxy" on a node, or "kube-apiserver", "etcd",
// "kube-controller-manager", "kube-scheduler" on "cp".
func (c *Cluster) LogPath(host, component string) string {
	return filepath.Join(c.path("logs"), host+"-"+component+".log")
}

// Credentials returns what a client anywhere in the fabric needs to
// reach the API server as user (the admin, or one of ClusterSpec.Users):
// its URL, the CA file, and a file holding the user's bearer token. The
// URL is the control plane's own address, not the VIP: a fault on the LB
// (seed 001) must not blind the client watching it.
func (c *Cluster) Credentials(user string) (server, caFile, tokenFile string, err error) {
	tok, ok := c.pki.tokens[user]
	if !ok {
		return "", "", "", fmt.Errorf("cluster: no user %q (add it to ClusterSpec.Users)", user)
	}
	tokenFile = c.path("pki", user+".token")
	if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
		return "", "", "", err
	}
	return "https://" + netip.AddrPortFrom(c.Fabric.ControlPlane.Addr, lab.APIServerPort).String(), c.pki.path(pkiCA), tokenFile, nil
}

// RSS is the resident memory of every process the cluster runs: its
// daemons, containerd's shims and the containers.
func (c *Cluster) RSS() (uint64, error) {
	pids, err := cgroupPids(filepath.Join(c.cgroups.unified, cgroupDir(c.spec.Fabric.Prefix)))
	if err != nil {
		return 0, err
	}
	var total uint64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue // exited meanwhile
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				var kb uint64
				fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
				total += kb << 10
			}
		}
	}
	return total, nil
}
