package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netprober/prober/lab"
)

// Cluster is a running cluster: the fabric, the control plane, the nodes.
// Close stops and removes all of it.
type Cluster struct {
	// Fabric is the lab under the cluster: Fabric.Nodes() are its nodes,
	// Fabric.ControlPlane where the control plane runs, Fabric.VIP the
	// API server's load balancer.
	Fabric *lab.Fabric
	// Dir holds state, logs (Dir/logs) and the admin's kubeconfig.
	Dir string

	spec    ClusterSpec
	out     io.Writer
	log     *slog.Logger
	ownDir  bool
	cgroups cgroupLayout
	pki     *clusterPKI
	images  []string // OCI archives every node imports

	mu    sync.Mutex
	cp    []*Process
	nodes map[string]*clusterNode
}

// StartCluster builds the fabric and a cluster on it, and returns when
// every node is Ready: step by step, one line each to spec.Out. On error,
// or when ctx ends, everything made so far is removed.
func StartCluster(ctx context.Context, spec ClusterSpec) (c *Cluster, err error) {
	if err := lab.NeedNetAdmin(); err != nil {
		return nil, err
	}
	if err := errors.Join(CheckClusterHost(), CheckClusterTools(spec.KubeDir)); err != nil {
		return nil, err
	}
	for _, b := range []struct{ what, path string }{{"the prober binary", spec.Prober}, {"the prober-agent binary", spec.Agent}, {"the pause binary", spec.Pause}} {
		if st, err := os.Stat(b.path); err != nil || !st.Mode().IsRegular() {
			return nil, fmt.Errorf("cluster: %s %q: not a file", b.what, b.path)
		}
	}
	if spec.Image == "" {
		spec.Image = ProberImage
	}
	if spec.Out == nil {
		spec.Out = io.Discard
	}
	if spec.Logger == nil {
		spec.Logger = slog.New(slog.DiscardHandler)
	}
	fs := &spec.Fabric
	fs.LB, fs.ControlPlane, fs.PodCIDRs, fs.PodsPerNode = true, true, true, -1
	fs.SetDefaults()
	if err := fs.Validate(); err != nil {
		return nil, fmt.Errorf("cluster: fabric: %w", err)
	}
	layout, err := detectCgroups()
	if err != nil {
		return nil, err
	}
	c = &Cluster{spec: spec, out: spec.Out, log: spec.Logger, cgroups: layout, nodes: map[string]*clusterNode{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
			c = nil
		}
	}()
	// Leftovers: clusters whose process died before cleaning up, and a
	// lab or cluster of the same prefix.
	sweepClusters(layout, func(format string, args ...any) { c.log.Warn(fmt.Sprintf(format, args...)) })
	if err := errors.Join(removeCluster(spec.Fabric.Prefix, layout), lab.Down(spec.Fabric.Prefix)); err != nil {
		return c, fmt.Errorf("removing an earlier cluster %s: %w", spec.Fabric.Prefix, err)
	}
	c.Dir = spec.Dir
	if entries, err := os.ReadDir(c.Dir); c.Dir != "" && (err == nil && len(entries) > 0) {
		// An old cluster's etcd would bring its objects back.
		return c, fmt.Errorf("cluster: directory %s is not empty", c.Dir)
	}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "prober-cluster-"+spec.Fabric.Prefix+"-"); err != nil {
			return c, err
		}
		c.ownDir = true
	}
	owner := clusterOwner{Prefix: spec.Fabric.Prefix, PID: os.Getpid(), Start: procStart(os.Getpid())}
	if c.ownDir {
		owner.Dir = c.Dir
	}
	if err := writeOwner(owner); err != nil {
		return c, err
	}
	if err := os.MkdirAll(filepath.Join(c.Dir, "logs"), 0o755); err != nil {
		return c, err
	}
	s := spec.Fabric
	steps := []struct {
		what string
		do   func(context.Context) error
	}{
		{fmt.Sprintf("building the fabric: %s, the LB, the control plane (namespaces %s-*)", s.Shape(), s.Prefix), c.upFabric},
		{"writing certificates, tokens and the images " + spec.Image + " and " + PauseImage, c.prepare},
		{"starting the control plane: etcd, kube-apiserver behind the VIP, kube-controller-manager, kube-scheduler", c.startControlPlane},
		{"starting every node: containerd, kubelet, kube-proxy in its own mount namespace", c.startNodes},
		{"waiting for every node to register, take its pod CIDR and be Ready", c.waitNodesReady},
		{fmt.Sprintf("starting the cluster's DNS: CoreDNS, Service %s/%s at %s", DNSNamespace, DNSService, strings.Join(c.perFamily(DNSServiceIP, DNSServiceIP6), ", ")), c.startDNS},
	}
	for _, st := range steps {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		start := time.Now()
		fmt.Fprintf(c.out, "==> %s\n", st.what)
		if err := st.do(ctx); err != nil {
			return c, err
		}
		c.log.Info("cluster step done", "step", st.what, "took", time.Since(start).Round(time.Millisecond))
	}
	return c, nil
}

func (c *Cluster) upFabric(ctx context.Context) (err error) {
	c.Fabric, err = lab.Up(ctx, c.spec.Fabric, c.log)
	return err
}

// Close clears the fabric's faults, stops every node and the control
// plane by the pids it recorded, kills what they left in the cluster's
// cgroups (shims, containers), removes the cgroups, the fabric and the
// cluster's directory. It is idempotent and returns every error it met.
func (c *Cluster) Close() error {
	var errs []error
	c.mu.Lock()
	nodes := c.nodes
	c.nodes = map[string]*clusterNode{}
	cp := c.cp
	c.cp = nil
	c.mu.Unlock()
	if len(nodes) > 0 || len(cp) > 0 {
		fmt.Fprintf(c.out, "==> stopping the cluster\n")
		// Faults first: a fault that eats the daemons' last packets (an
		// LB that forgot their flows) holds the API server's shutdown.
		if c.Fabric != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			errs = append(errs, c.Fabric.Clear(ctx))
			cancel()
		}
	}
	nodeErrs := make([]error, 0, len(nodes))
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Nodes first: the API server drains its clients' requests
			// (watches too) before it exits.
			err := n.powerOff()
			emu.Lock()
			nodeErrs = append(nodeErrs, err)
			emu.Unlock()
		}()
	}
	wg.Wait()
	errs = append(errs, nodeErrs...)
	for _, p := range slices.Backward(cp) {
		errs = append(errs, p.Close())
	}
	errs = append(errs, removeCluster(c.spec.Fabric.Prefix, c.cgroups))
	if c.Fabric != nil {
		fmt.Fprintf(c.out, "==> removing the fabric\n")
		errs = append(errs, lab.Down(c.spec.Fabric.Prefix))
		c.Fabric = nil
	}
	if c.ownDir && c.Dir != "" {
		errs = append(errs, os.RemoveAll(c.Dir))
		c.Dir = ""
	}
	err := errors.Join(errs...)
	// The record stays while something is left, so a later start of any
	// cluster sweeps it.
	if err == nil {
		if rerr := os.Remove(ownerPath(c.spec.Fabric.Prefix)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = rerr
		}
	}
	return err
}

// removeCluster kills every process left in the cluster's cgroups and
// removes them; the namespaces go with lab.Down.
func removeCluster(prefix string, l cgroupLayout) error {
	dir := filepath.Join(l.unified, cgroupDir(prefix))
	if err := killCgroup(dir, 20*time.Second); err != nil {
		return err
	}
	var errs []error
	for _, h := range append([]string{l.unified}, l.v1...) {
		errs = append(errs, removeCgroupTree(filepath.Join(h, cgroupDir(prefix))))
	}
	return errors.Join(errs...)
}

// Kubectl runs the pinned kubectl as the cluster's admin, from the
// control plane's namespace, and returns its output (stdout then stderr).
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	return c.kubectlIn(ctx, nil, args...)
}

// KubectlStdin is Kubectl with stdin, for `apply -f -`.
func (c *Cluster) KubectlStdin(ctx context.Context, stdin []byte, args ...string) (string, error) {
	return c.kubectlIn(ctx, stdin, args...)
}

// KubectlPlugin runs a kubectl plugin through the pinned kubectl, as the
// cluster's admin (KUBECONFIG: kubectl hands a plugin none of its own
// flags), with pluginDir first on PATH: `kubectl prober status` runs
// pluginDir/kubectl-prober.
func (c *Cluster) KubectlPlugin(ctx context.Context, pluginDir string, args ...string) (string, error) {
	cmd, err := c.Fabric.Command(ctx, lab.ControlPlaneName, filepath.Join(c.spec.KubeDir, "kubectl"), args...)
	if err != nil {
		return "", err
	}
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.AdminKubeconfig(), "PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return c.runKubectl(cmd, nil, args)
}

func (c *Cluster) kubectlIn(ctx context.Context, stdin []byte, args ...string) (string, error) {
	argv := append([]string{"--kubeconfig", c.AdminKubeconfig(), "--request-timeout=20s"}, args...)
	cmd, err := c.Fabric.Command(ctx, lab.ControlPlaneName, filepath.Join(c.spec.KubeDir, "kubectl"), argv...)
	if err != nil {
		return "", err
	}
	return c.runKubectl(cmd, stdin, args)
}

// runKubectl runs a kubectl cmd made by Fabric.Command and returns its
// output (stdout then stderr), its error naming args and saying stderr.
func (c *Cluster) runKubectl(cmd *exec.Cmd, stdin []byte, args []string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.WaitDelay = 5 * time.Second
	if err := lab.Start(cmd); err != nil {
		return "", err
	}
	err := cmd.Wait()
	out := stdout.String() + stderr.String()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out, fmt.Errorf("kubectl %s: exit %d: %s", strings.Join(args, " "), ee.ExitCode(), strings.TrimSpace(stderr.String()))
	}
	return out, err
}

// AdminKubeconfig is the admin's kubeconfig, for the control plane's
// namespace (the API server on its loopback).
func (c *Cluster) AdminKubeconfig() string { return filepath.Join(c.Dir, "admin.kubeconfig") }

// perFamily is the IPv4 value and, on a dual-stack cluster, the IPv6
// one, IPv4 first.
func (c *Cluster) perFamily(v4, v6 fmt.Stringer) []string {
	if !c.spec.Fabric.IPv6 {
		return []string{v4.String()}
	}
	return []string{v4.String(), v6.String()}
}

// dualStack is perFamily as a flag that takes one of each: "a,b".
func (c *Cluster) dualStack(v4, v6 fmt.Stringer) string {
	return strings.Join(c.perFamily(v4, v6), ",")
}

// startDNS deploys CoreDNS and waits until its pods are Ready and its
// Service has their endpoints.
func (c *Cluster) startDNS(ctx context.Context) error {
	if out, err := c.KubectlStdin(ctx, []byte(coreDNSManifest(c.spec.Fabric.IPv6)), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("coredns: %w\n%s", err, out)
	}
	return c.WaitRollout(ctx, DNSNamespace, 2*time.Minute)
}
