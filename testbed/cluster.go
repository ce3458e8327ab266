package testbed

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/netprober/prober/lab"
)

// ClusterSpec describes a real Kubernetes cluster on the lab fabric: the
// fabric's nodes run containerd, kubelet and kube-proxy, the control plane
// runs in the fabric's control-plane namespace behind the LB's VIP, and
// the images are built from this checkout, so nothing comes from a
// registry.
type ClusterSpec struct {
	// Fabric is the lab the cluster runs on. StartCluster turns on its
	// LB, ControlPlane and PodCIDRs and turns off its lab pods: pods come
	// from the kubelets. With Fabric.IPv6 the cluster is dual-stack, IPv4
	// first: Services in ServiceCIDR and ServiceCIDR6, nodes with an
	// address and a pod CIDR of each family, pods with an IP of each.
	Fabric lab.Spec
	// KubeDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kubelet, kube-proxy, kubectl and coredns, the
	// cluster's DNS (hack/kube/build.sh builds and caches them).
	KubeDir string
	// Prober, Agent and Pause are static binaries: the prober image's
	// /prober and /prober-agent (cmd/prober-agent, which the DaemonSets
	// run) and the pods' sandbox image's (testbed/pause).
	Prober, Agent, Pause string
	// Image names the prober image, ProberImage by default.
	Image string
	// Users are extra API users, each with a token and no groups (grant
	// them roles with RBAC), for clients such as a Prometheus; see
	// Cluster.Credentials.
	Users []string
	// Dir holds the cluster's state, logs and images; a new temporary
	// directory when empty, removed by Close.
	Dir string
	// Out gets one line per step, as a person watching wants them.
	Out io.Writer
	// Logger gets the details; nil discards them.
	Logger *slog.Logger
}

// Images the cluster imports into every node.
const (
	ProberImage = "prober.local/prober:dev"
	PauseImage  = "prober.local/pause:1"
)

// Cluster addresses, all inside the lab's 198.18.0.0/15.
var (
	// ServiceCIDR holds the Services' ClusterIPs; the kubernetes Service
	// takes its first address.
	ServiceCIDR = netip.MustParsePrefix("198.19.200.0/24")
	// KubernetesServiceIP is the kubernetes Service's ClusterIP.
	KubernetesServiceIP = netip.MustParseAddr("198.19.200.1")
	// ServiceCIDR6 holds a dual-stack cluster's IPv6 ClusterIPs, inside
	// the lab's 2001:2::/48 and outside its plan.
	ServiceCIDR6 = netip.MustParsePrefix("2001:2:0:200::/112")
)

// clusterTools are the Debian packages' programs the nodes need.
var clusterTools = []struct{ cmd, pkg string }{
	{"containerd", "containerd"},
	{"containerd-shim-runc-v2", "containerd"},
	{"ctr", "containerd"},
	{"runc", "runc"},
	{"iptables", "iptables"},
	{"nsenter", "util-linux"},
	{"mount", "mount"},
}

// cniDir is where Debian's containernetworking-plugins puts the plugins.
const cniDir = "/usr/lib/cni"

// cniPlugins are the CNI plugins a node's network config uses.
var cniPlugins = []string{"ptp", "host-local", "portmap", "loopback"}

// kubeBinaries are what ClusterSpec.KubeDir must hold.
var kubeBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl", "coredns"}

// CheckClusterTools reports every program a cluster needs that this
// machine lacks, at once, with how to get it: the Debian packages and the
// pinned Kubernetes binaries in kubeDir. nil when all is there. What no
// package installs is CheckClusterHost's.
func CheckClusterTools(kubeDir string) error {
	var missing, pkgs []string
	for _, t := range clusterTools {
		if _, err := exec.LookPath(t.cmd); err != nil {
			missing = append(missing, t.cmd)
			if !slices.Contains(pkgs, t.pkg) {
				pkgs = append(pkgs, t.pkg)
			}
		}
	}
	for _, p := range cniPlugins {
		if _, err := os.Stat(filepath.Join(cniDir, p)); err != nil {
			missing = append(missing, filepath.Join(cniDir, p))
			if !slices.Contains(pkgs, "containernetworking-plugins") {
				pkgs = append(pkgs, "containernetworking-plugins")
			}
		}
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("missing %s (apt-get install %s, or make deps)", strings.Join(missing, ", "), strings.Join(pkgs, " ")))
	}
	var kube []string
	for _, b := range kubeBinaries {
		if st, err := os.Stat(filepath.Join(kubeDir, b)); kubeDir == "" || err != nil || st.Mode()&0o111 == 0 {
			kube = append(kube, b)
		}
	}
	if len(kube) > 0 {
		problems = append(problems, fmt.Sprintf("no %s in %q (build them: make kube)", strings.Join(kube, ", "), kubeDir))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("a real cluster needs: %s", strings.Join(problems, "; "))
}

// CheckClusterHost reports what the machine itself lacks for a cluster,
// which no install step can add: the kernel's overlayfs (containerd's
// snapshotter) and a cgroup v2 hierarchy, where the harness tracks its
// processes. Root is lab.NeedNetAdmin's to say.
func CheckClusterHost() error {
	var problems []string
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(b), "\toverlay\n") {
		problems = append(problems, "the kernel has no overlayfs, which containerd's snapshotter needs (modprobe overlay)")
	}
	if err := cgroupV2(); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("a real cluster needs: %s", strings.Join(problems, "; "))
}
