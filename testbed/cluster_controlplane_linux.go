package testbed

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/netprober/prober/lab"
)

// prepare writes the PKI, the kubeconfigs and the two images.
func (c *Cluster) prepare(ctx context.Context) error {
	f := c.Fabric
	ids := map[string][]string{
		clusterAdminUser:                 {"system:masters"},
		"system:kube-controller-manager": nil,
		"system:kube-scheduler":          nil,
		"system:kube-proxy":              nil,
	}
	for _, n := range f.Nodes() {
		ids[nodeUser(n.Name)] = []string{"system:nodes"}
	}
	for _, u := range c.spec.Users {
		if _, dup := ids[u]; dup || u == "" || strings.ContainsAny(u, ",\"\n") {
			return fmt.Errorf("cluster: user %q: empty, reserved or not a plain name", u)
		}
		ids[u] = nil
	}
	var err error
	c.pki, err = writeClusterPKI(filepath.Join(c.Dir, "pki"), []netip.Addr{f.ControlPlane.Addr, f.VIP, KubernetesServiceIP}, ids)
	if err != nil {
		return fmt.Errorf("cluster pki: %w", err)
	}
	local := fmt.Sprintf("https://127.0.0.1:%d", lab.APIServerPort)
	for _, k := range []struct{ file, user string }{
		{c.AdminKubeconfig(), clusterAdminUser},
		{c.path("kube-controller-manager.kubeconfig"), "system:kube-controller-manager"},
		{c.path("kube-scheduler.kubeconfig"), "system:kube-scheduler"},
	} {
		if err := c.pki.kubeconfig(k.file, local, k.user); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(c.path("images"), 0o755); err != nil {
		return err
	}
	for _, im := range []struct {
		file string
		spec ImageSpec
	}{
		{"prober.tar", ImageSpec{Ref: c.spec.Image, Files: []ImageFile{{From: c.spec.Prober, Path: "/prober"}, {From: c.spec.Agent, Path: "/prober-agent"}}, Entrypoint: []string{"/prober"}}},
		{"pause.tar", ImageSpec{Ref: PauseImage, Files: []ImageFile{{From: c.spec.Pause, Path: "/pause"}}, Entrypoint: []string{"/pause"}}},
		{"coredns.tar", ImageSpec{Ref: CoreDNSImage, Files: []ImageFile{{From: filepath.Join(c.spec.KubeDir, "coredns"), Path: "/coredns"}}, Entrypoint: []string{"/coredns"}}},
	} {
		p := c.path("images", im.file)
		if err := WriteImage(p, im.spec); err != nil {
			return err
		}
		c.images = append(c.images, p)
	}
	return nil
}

func nodeUser(node string) string { return "system:node:" + node }

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.Dir}, elem...)...)
}

// startDaemon starts one of the cluster's daemons in host's namespace and
// in the cgroup v2 directory cgroup, its log in Dir/logs/host-name.log.
// Not under a context: the daemons outlive StartCluster; Close stops them.
func (c *Cluster) startDaemon(host, name, cgroup string, argv []string, mountNS bool) (*Process, error) {
	return StartProcess(context.Background(), c.Fabric, ProcessSpec{
		Host: host, Name: host + "-" + name, Path: argv[0], Args: argv[1:],
		Dir: c.path("logs"), Cgroup: cgroup, MountNS: mountNS,
		// kube-apiserver drains its requests for some seconds.
		StopGrace: 30 * time.Second,
	})
}

// cgroup creates (once) and returns the cluster's cgroup v2 directory for
// group ("cp", a node's name).
func (c *Cluster) cgroup(group string) (string, error) {
	dir := filepath.Join(c.cgroups.unified, cgroupDir(c.spec.Fabric.Prefix), group)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cgroup %s: %w", dir, err)
	}
	return dir, nil
}

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager
// and kube-scheduler in the control plane's namespace. The API server
// serves on the control plane's address; kubelets and kube-proxy reach it
// through the VIP (the LB forwards 6443), kube-controller-manager and
// kube-scheduler on loopback.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	cg, err := c.cgroup("cp")
	if err != nil {
		return err
	}
	cp := c.Fabric.ControlPlane
	bin := func(name string) string { return filepath.Join(c.spec.KubeDir, name) }
	pki := c.pki.path
	daemons := []struct {
		argv  []string
		ready func(context.Context) error
	}{
		{[]string{bin("etcd"),
			"--data-dir", c.path("etcd"),
			"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
			"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
			"--initial-cluster", "default=http://127.0.0.1:2380", "--listen-metrics-urls", "http://127.0.0.1:2381",
			"--unsafe-no-fsync", "--log-level", "warn",
		}, nil},
		{[]string{bin("kube-apiserver"),
			"--etcd-servers", "http://127.0.0.1:2379",
			"--bind-address", "0.0.0.0", "--advertise-address", cp.Addr.String(),
			"--secure-port", fmt.Sprint(lab.APIServerPort),
			"--tls-cert-file", pki(pkiServingCert), "--tls-private-key-file", pki(pkiServingKey),
			"--client-ca-file", pki(pkiCA),
			"--kubelet-client-certificate", pki(pkiKubeletCert), "--kubelet-client-key", pki(pkiKubeletKey),
			"--kubelet-preferred-address-types", "InternalIP",
			"--service-account-key-file", pki(pkiSAPub), "--service-account-signing-key-file", pki(pkiSAKey),
			"--service-account-issuer", "https://kubernetes.default.svc",
			"--service-cluster-ip-range", c.dualStack(ServiceCIDR, ServiceCIDR6),
			"--token-auth-file", pki(pkiTokens),
			"--authorization-mode", "Node,RBAC",
			"--enable-admission-plugins", "NodeRestriction",
			"--allow-privileged=true", "--profiling=false",
		}, c.waitAPIServer},
		{[]string{bin("kube-controller-manager"),
			"--kubeconfig", c.path("kube-controller-manager.kubeconfig"),
			"--root-ca-file", pki(pkiCA), "--service-account-private-key-file", pki(pkiSAKey),
			// Each controller as its own ServiceAccount, with the bootstrap
			// roles the API server grants them.
			"--use-service-account-credentials=true",
			"--leader-elect=false", "--secure-port=0", "--profiling=false",
		}, nil},
		{[]string{bin("kube-scheduler"),
			"--kubeconfig", c.path("kube-scheduler.kubeconfig"),
			"--leader-elect=false", "--secure-port=0", "--profiling=false",
		}, nil},
	}
	for _, d := range daemons {
		p, err := c.startDaemon(lab.ControlPlaneName, filepath.Base(d.argv[0]), cg, d.argv, false)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.cp = append(c.cp, p)
		c.mu.Unlock()
		if d.ready != nil {
			if err := d.ready(ctx); err != nil {
				return p.failure(err)
			}
		}
	}
	return nil
}

// waitAPIServer waits until the API server answers /readyz, through the
// VIP from a node as the kubelets will reach it.
func (c *Cluster) waitAPIServer(ctx context.Context) error {
	deadline := time.Now().Add(90 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		out, err := c.Kubectl(ctx, "get", "--raw", "/readyz")
		if err == nil && strings.TrimSpace(out) == "ok" {
			return nil
		}
		last = err
		for _, p := range c.cp {
			if err := p.exited(); err != nil {
				return p.failure(err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("kube-apiserver not ready after 90s: %v", last)
}
