package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netprober/prober/lab"
)

// clusterNode is one lab node running containerd, kubelet and kube-proxy.
// All three share a mount namespace of their own (held by a small
// process), so that /run, /var/lib, /var/log and the kernel settings
// kubelet insists on are private to the node: nothing they mount or write
// there reaches the machine.
type clusterNode struct {
	host   lab.Host
	dir    string
	cgroup string // its cgroup v2 directory: every process it starts
	procs  []*Process
}

// kubeletSysctls are the kernel settings kubelet checks at start and
// writes when they differ (pkg/kubelet/cm: setupKernelTunables). They are
// machine-wide, so each node's mount namespace gets files holding these
// values bound over them instead.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

func (c *Cluster) startNodes(ctx context.Context) error {
	nodes := c.Fabric.Nodes()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, h := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.startNode(ctx, h)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) startNode(ctx context.Context, h lab.Host) error {
	cg, err := c.cgroup(h.Name)
	if err != nil {
		return err
	}
	n := &clusterNode{host: h, dir: c.path("nodes", h.Name), cgroup: cg}
	c.mu.Lock()
	c.nodes[h.Name] = n
	c.mu.Unlock()
	if err := c.writeNodeFiles(n); err != nil {
		return fmt.Errorf("node %s: %w", h.Name, err)
	}
	kubeletRoot := filepath.Join(cgroupDir(c.spec.Fabric.Prefix), h.Name, "pods")
	if err := c.cgroups.makeKubeletRoot(kubeletRoot); err != nil {
		return fmt.Errorf("node %s: %w", h.Name, err)
	}
	holder, err := n.start(c, "mountns", []string{"sh", "-c", n.mountScript()}, true)
	if err != nil {
		return err
	}
	if err := waitExec(ctx, holder, "sleep", 10*time.Second); err != nil {
		return holder.failure(err)
	}
	enter := []string{"nsenter", fmt.Sprintf("--mount=/proc/%d/ns/mnt", holder.Pid()), "--"}
	containerd, err := n.start(c, "containerd", append(enter, "containerd", "--config", n.file("containerd.toml")), false)
	if err != nil {
		return err
	}
	if err := n.waitContainerd(ctx, containerd); err != nil {
		return err
	}
	for _, im := range c.images {
		if out, err := n.ctr(ctx, "-n", "k8s.io", "images", "import", "--no-unpack=false", im); err != nil {
			return fmt.Errorf("node %s: import %s: %v: %s", h.Name, filepath.Base(im), err, out)
		}
	}
	bin := func(name string) string { return filepath.Join(c.spec.KubeDir, name) }
	if _, err := n.start(c, "kubelet", append(enter, bin("kubelet"),
		"--config", n.file("kubelet.yaml"),
		"--kubeconfig", n.file("kubelet.kubeconfig"),
		"--root-dir", n.file("kubelet"),
		"--cert-dir", n.file("kubelet", "pki"),
		"--hostname-override", h.Name,
		"--node-ip", c.dualStack(h.Addr, h.Addr6),
		"--node-labels", "topology.kubernetes.io/zone="+h.Zone,
	), false); err != nil {
		return err
	}
	_, err = n.start(c, "kube-proxy", append(enter, bin("kube-proxy"), "--config", n.file("kube-proxy.yaml")), false)
	return err
}

func (n *clusterNode) file(elem ...string) string {
	return filepath.Join(append([]string{n.dir}, elem...)...)
}

// start starts one of the node's daemons in its namespace and cgroup.
func (n *clusterNode) start(c *Cluster, what string, argv []string, newMountNS bool) (*Process, error) {
	p, err := c.startDaemon(n.host.Name, what, n.cgroup, argv, newMountNS)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	n.procs = append(n.procs, p)
	c.mu.Unlock()
	return p, nil
}

// powerOff stops the node's daemons, newest first (kube-proxy, kubelet,
// containerd, then the mount namespace's holder), and kills what they
// leave in its cgroup: containerd's shims and the containers, as a
// machine that loses power stops them.
func (n *clusterNode) powerOff() error {
	var errs []error
	for _, p := range slices.Backward(n.procs) {
		errs = append(errs, p.Close())
	}
	return errors.Join(append(errs, killCgroup(n.cgroup, 20*time.Second))...)
}

// mountScript prepares the node's mount namespace, then holds it.
func (n *clusterNode) mountScript() string {
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, d := range []string{"/run", "/var/lib", "/var/log"} {
		fmt.Fprintf(&b, "mount -t tmpfs -o mode=0755 prober-node %s\n", d)
	}
	for _, k := range slices.Sorted(maps.Keys(kubeletSysctls)) {
		fmt.Fprintf(&b, "mount --bind %s /proc/sys/%s\n", n.file("sysctl", strings.ReplaceAll(k, "/", ".")), k)
	}
	b.WriteString("exec sleep infinity\n")
	return b.String()
}

// waitExec waits until p has exec'd prog: its set-up script is done.
func waitExec(ctx context.Context, p *Process, prog string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid()))
		if strings.HasPrefix(string(b), prog+"\x00") {
			return nil
		}
		if err := p.exited(); err != nil {
			return fmt.Errorf("%w before %s", err, prog)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not %s after %v", prog, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ctr runs containerd's client against the node's socket.
func (n *clusterNode) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.file("containerd.sock")}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (n *clusterNode) waitContainerd(ctx context.Context, p *Process) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := n.ctr(ctx, "version"); err == nil {
			return nil
		}
		if err := p.exited(); err != nil {
			return p.failure(err)
		}
		if time.Now().After(deadline) {
			return p.failure(fmt.Errorf("no answer on %s after 30s", n.file("containerd.sock")))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeNodeFiles writes the node's configurations: containerd's, the CNI
// network, kubelet's and kube-proxy's, their kubeconfigs, and the sysctl
// value files.
func (c *Cluster) writeNodeFiles(n *clusterNode) error {
	for _, d := range []string{"containerd/root", "containerd/state", "cni/net.d", "cni/ipam", "kubelet/pki", "pod-logs", "sysctl"} {
		if err := os.MkdirAll(n.file(d), 0o755); err != nil {
			return err
		}
	}
	for k, v := range kubeletSysctls {
		if err := os.WriteFile(n.file("sysctl", strings.ReplaceAll(k, "/", ".")), []byte(v+"\n"), 0o644); err != nil {
			return err
		}
	}
	vip := fmt.Sprintf("https://%s:%d", c.Fabric.VIP, lab.APIServerPort)
	if err := c.pki.kubeconfig(n.file("kubelet.kubeconfig"), vip, nodeUser(n.host.Name)); err != nil {
		return err
	}
	if err := c.pki.kubeconfig(n.file("kube-proxy.kubeconfig"), vip, "system:kube-proxy"); err != nil {
		return err
	}
	ranges := [][]map[string]string{{{"subnet": n.host.PodCIDR.String()}}}
	routes := []map[string]string{{"dst": "0.0.0.0/0"}}
	if c.spec.Fabric.IPv6 {
		ranges = append(ranges, []map[string]string{{"subnet": n.host.PodCIDR6.String()}})
		routes = append(routes, map[string]string{"dst": "::/0"})
	}
	ptp := map[string]any{"type": "ptp", "ipMasq": false, "ipam": map[string]any{
		"type":    "host-local",
		"ranges":  ranges,
		"routes":  routes,
		"dataDir": n.file("cni", "ipam"),
	}}
	if c.spec.Fabric.Overlay {
		// The pods' packets to other nodes are encapsulated: a full-size
		// one would not fit the underlay's 1500 bytes.
		ptp["mtu"] = lab.OverlayMTU
	}
	cni, err := json.MarshalIndent(map[string]any{
		"cniVersion": "0.4.0", "name": "prober-lab",
		"plugins": []map[string]any{ptp, {"type": "portmap", "capabilities": map[string]bool{"portMappings": true}}},
	}, "", "  ")
	if err != nil {
		return err
	}
	files := map[string]string{
		"cni/net.d/10-prober-lab.conflist": string(cni),
		"containerd.toml": fmt.Sprintf(`version = 2
root = %q
state = %q
# Nothing but the CRI and what it needs: no snapshotter or tracer that
# would reach for the machine's devices or network.
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # Root here may lack CAP_SYS_RESOURCE: runc cannot lower the sandbox's
  # oom_score_adj below the caller's, so never ask it to.
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, n.file("containerd", "root"), n.file("containerd", "state"), n.file("containerd.sock"), n.file("containerd.sock.ttrpc"),
			n.file("containerd", "opt"), PauseImage, cniDir, n.file("cni", "net.d")),
		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupRoot: /%s
failCgroupV1: false
failSwapOn: false
podLogsDir: %s
clusterDomain: cluster.local
clusterDNS: [%s]
resolvConf: /etc/resolv.conf
serializeImagePulls: false
maxPods: 12
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, nodefs.inodesFree: 1%%, imagefs.available: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, n.host.Addr, c.pki.path(pkiCA), n.file("containerd.sock"), filepath.Join(cgroupDir(c.spec.Fabric.Prefix), n.host.Name, "pods"), n.file("pod-logs"),
			strings.Join(c.perFamily(DNSServiceIP, DNSServiceIP6), ", ")),
		"kube-proxy.yaml": fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
oomScoreAdj: 0
# 0 leaves the kernel's conntrack settings alone: nf_conntrack_max and the
# hash size are machine-wide.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false, minSyncPeriod: 1s}
`, n.file("kube-proxy.kubeconfig"), n.host.Name, c.dualStack(lab.PodRange, lab.PodRange6)),
	}
	for name, content := range files {
		if err := os.WriteFile(n.file(name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
