package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/cmd/internal/cli"
	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/testbed"
)

// runLabCluster is `prober lab cluster`: a real Kubernetes cluster on the
// lab fabric (containerd, kubelet and kube-proxy on every node, the
// control plane behind the LB's VIP), deploy/ applied as a user applies
// it, the matrix page on this machine's loopback, then seed 004's fault
// and the diagnosis. Ctrl-C, or the end, removes everything.
func runLabCluster(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("prober lab cluster", "[--kube-bin DIR] [--pause PATH] [--agent PATH] [--ipv6] [--overlay] [--device spine1] [--permille N] [--keep]", stderr)
	prefix := fs.String("prefix", "pcluster", "namespace name prefix of the cluster's fabric")
	spines := fs.Int("spines", 2, "spines (1..8)")
	racks := fs.Int("racks", 2, "racks, one ToR each (1..9)")
	nodes := fs.Int("nodes", 2, "nodes per rack (1..9)")
	ipv6 := fs.Bool("ipv6", false, "dual-stack: Nodes, pods and Services of both families (IPv6 from 2001:2::/48), IPv4 first")
	overlay := fs.Bool("overlay", false, "pods on a VXLAN overlay (flannel's vxlan backend: flannel.1, UDP 8472, pods at MTU 1450) instead of pod CIDRs routed by the fabric")
	kubeBin := fs.String("kube-bin", os.Getenv("PROBER_KUBE_ASSETS"), "directory of the pinned Kubernetes binaries and prometheus (make kube prints it)")
	pause := fs.String("pause", "", "the pods' sandbox binary (default: pause beside this binary; make pause builds it)")
	agentBin := fs.String("agent", "", "the prober-agent binary the DaemonSets run (default: prober-agent beside this binary; make build builds it)")
	deploy := fs.String("deploy", "deploy", "the manifests to apply, as kubectl apply -f does")
	listen := fs.String("listen", "127.0.0.1:9809", "where the matrix page is served on this machine while the demo runs")
	device := fs.String("device", "spine1", "the device to make lossy")
	permille := fs.Int("permille", 50, "random loss on the device, per mille of what it forwards")
	within := fs.Duration("within", 2*time.Minute, "how long to wait for the diagnosis")
	keep := fs.Bool("keep", false, "after the diagnosis, keep the cluster until Ctrl-C")
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code
	}
	if *permille < 1 || *permille > 1000 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "prober lab cluster: --permille must be 1..1000; no arguments")
		return cli.ExitUsage
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "prober lab cluster: %v\n", err)
		return cli.ExitRuntime
	}
	spec := testbed.ClusterSpec{
		Fabric:  lab.Spec{Prefix: *prefix, Spines: *spines, Racks: *racks, NodesPerRack: *nodes, IPv6: *ipv6, Overlay: *overlay},
		KubeDir: *kubeBin, Prober: exe, Agent: cmp.Or(*agentBin, filepath.Join(filepath.Dir(exe), "prober-agent")),
		Pause: cmp.Or(*pause, filepath.Join(filepath.Dir(exe), "pause")),
		Out:   stdout,
	}
	fault := lab.Fault{Kind: lab.FaultDeviceLoss, Device: *device, Permille: *permille}
	if err := labCluster(ctx, spec, *deploy, *listen, fault, *within, *keep); err != nil {
		fmt.Fprintf(stderr, "prober lab cluster: %v\n", err)
		return cli.ExitRuntime
	}
	return cli.ExitOK
}

func labCluster(ctx context.Context, spec testbed.ClusterSpec, deploy, listen string, fault lab.Fault, within time.Duration, keep bool) (err error) {
	out, tty := spec.Out, isTerminal(spec.Out)
	if err := lab.NeedNetAdmin(); err != nil {
		return err
	}
	if err := testbed.CheckClusterTools(spec.KubeDir); err != nil {
		return err
	}
	start := time.Now()
	c, err := testbed.StartCluster(ctx, spec)
	if err != nil {
		return err
	}
	defer func() {
		// Ctrl-C cancelled ctx; the clean-up must still run to the end.
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}()
	if err := c.Fabric.Check(fault); err != nil {
		return err
	}
	fmt.Fprintf(out, "==> cluster up in %.0fs: kubectl from the control plane's namespace:\n    ip netns exec %s %s --kubeconfig %s get nodes\n",
		time.Since(start).Seconds(), c.Fabric.ControlPlane.Namespace, filepath.Join(spec.KubeDir, "kubectl"), filepath.Join(c.Dir, "admin.kubeconfig"))

	edits := testbed.DeployEdits{Image: testbed.ProberImage, APIServerLB: netip.AddrPortFrom(c.Fabric.VIP, lab.APIServerPort), Hops: c.Fabric.Hops()}
	manifests := filepath.Join(c.Dir, "deploy")
	if err := testbed.RenderDeploy(deploy, manifests, edits); err != nil {
		return err
	}
	fmt.Fprintf(out, "==> kubectl apply -f %s/, with the edits docs/kubernetes.md asks for: image %s, apiServerLB %s, hops of the fabric's %d router addresses\n",
		strings.TrimSuffix(deploy, "/"), edits.Image, edits.APIServerLB, len(edits.Hops))
	if msg, err := c.Apply(ctx, manifests); err != nil {
		return fmt.Errorf("%w\n%s", err, msg)
	}
	if err := c.WaitRollout(ctx, "prober", 3*time.Minute); err != nil {
		return err
	}
	addr, err := c.Forward(ctx, listen, "prober", "prober-matrix")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "==> the matrix page: http://%s/ (forwarded to the prober-matrix Service)\n", addr)
	svc, err := c.ServiceAddr(ctx, "prober", "prober-matrix")
	if err != nil {
		return err
	}
	m := testbed.MatrixClient{Base: "http://" + svc.String(), Client: c.HTTPClient(5 * time.Second)}
	defer m.Client.CloseIdleConnections()

	fmt.Fprintln(out, "==> healthy cluster: filling the agents' 60 s windows")
	healthy := time.Now()
	filled := func(_ matrix.Diagnosis, s matrix.Snapshot) bool {
		return len(s.Groups) > 0 && s.Time.Sub(healthy) > time.Minute
	}
	if _, err := m.WaitFor(ctx, out, tty, 2*time.Minute, "a full window", filled); err != nil {
		return err
	}
	if err := showMatrix(ctx, out, m, tty); err != nil {
		return err
	}

	fmt.Fprintf(out, "==> injecting seed 004's fault: %s (nftables in %s-%s)\n", fault, spec.Fabric.Prefix, fault.Device)
	injected := time.Now()
	if err := c.Fabric.Inject(ctx, fault); err != nil {
		return err
	}
	_, werr := m.WaitFor(ctx, out, tty, within, "the matrix to name "+fault.Device, func(d matrix.Diagnosis, _ matrix.Snapshot) bool {
		return len(d.Suspects) > 0 && d.Suspects[0].Name == fault.Device
	})
	if err := showMatrix(ctx, out, m, tty); err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	fmt.Fprintf(out, "==> %s named %.0fs after the fault, on real kubelets, pods and kube-proxy\n", fault.Device, time.Since(injected).Seconds())
	if keep {
		fmt.Fprintf(out, "==> keeping the cluster (the fault stays); Ctrl-C to clean up\n")
		<-ctx.Done()
		return nil
	}
	return c.Fabric.Clear(ctx)
}

// showMatrix prints the node-to-node heatmap and the diagnosis.
func showMatrix(ctx context.Context, out io.Writer, m testbed.MatrixClient, color bool) error {
	v, err := m.Matrix(ctx)
	if err != nil {
		return err
	}
	d, err := m.Diagnosis(ctx)
	if err != nil {
		return err
	}
	drawHeatmap(out, v.Snapshot, api.PathNodeToNode, api.ProtocolTCPSYN, color)
	printDiagnosis(out, d)
	return nil
}
