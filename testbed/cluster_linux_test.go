package testbed_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/charts"
	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/peers/peerstest"
	"github.com/netprober/prober/testbed"
	"github.com/netprober/prober/tlsfiles"
)

// clusterRun is TestCluster's cluster with prober deployed on it.
type clusterRun struct {
	t      *testing.T
	c      *testbed.Cluster
	matrix testbed.MatrixClient
	keys   map[string]string // pull keys by node agent (pullKey)
	// plugins holds prober as kubectl-prober (KubectlPlugin).
	plugins string
	// failed is what the phases failed on, said again as TestCluster
	// ends: a CI log shows its last lines, far from a phase's own.
	failed []string
}

// errorf is t.Errorf, the message kept for the summary.
func (r *clusterRun) errorf(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	r.failed = append(r.failed, t.Name()+": "+msg)
	t.Error(msg)
}

// fatalf is t.Fatalf, the message kept for the summary.
func (r *clusterRun) fatalf(t *testing.T, format string, args ...any) {
	t.Helper()
	r.errorf(t, format, args...)
	t.FailNow()
}

// TestCluster is prober as it ships, on a real cluster: charts/prober
// rendered by Helm's own engine with the values a user sets (image, API
// server LB, hops) and applied with kubectl to real kubelets, containerd
// and kube-proxy on the lab fabric, 2 racks x 2 nodes behind 2 spines,
// dual-stack (Nodes, pods and Services of both families, IPv4 first), or
// IPv4 alone with PROBER_CLUSTER_IPV4_ONLY=1; the pods on a flannel-style
// VXLAN overlay, as most CNIs run them by default, or routed by the
// fabric with PROBER_CLUSTER_ROUTED=1 (the scenario suites run both
// kinds on lab pods). Then the seeds' incidents, on the real paths.
func TestCluster(t *testing.T) {
	labtest.NeedNetAdmin(t)
	if err := testbed.CheckClusterHost(); err != nil {
		t.Skipf("skipped: %v", err)
	}
	kube := peerstest.Binaries(t)
	if err := testbed.CheckClusterTools(kube); err != nil {
		if os.Getenv("PROBER_REQUIRE_TOOLS") != "" {
			t.Fatal(err)
		}
		t.Skipf("skipped (make test installs what it needs): %v", err)
	}
	// Ctrl-C ends the waits; the cleanups then remove the cluster.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dualStack := os.Getenv("PROBER_CLUSTER_IPV4_ONLY") == ""
	overlay := os.Getenv("PROBER_CLUSTER_ROUTED") == ""
	ctx, cancel := context.WithTimeout(ctx, 25*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := buildStatic(t, dir, "./cmd/prober", "./cmd/prober-agent", "./testbed/pause")
	start := time.Now()
	c, err := testbed.StartCluster(ctx, testbed.ClusterSpec{
		Fabric:  lab.Spec{Prefix: labtest.Prefix(t), Spines: 2, Racks: 2, NodesPerRack: 2, Zones: 2, IPv6: dualStack, Overlay: overlay},
		KubeDir: kube, Prober: bin["prober"], Agent: bin["prober-agent"], Pause: bin["pause"],
		Users: []string{"prometheus"}, Out: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	t.Logf("cluster up in %v", time.Since(start).Round(time.Millisecond))

	// prober through its chart, with the values a user of this cluster
	// would set (deploy/daemonset.yaml is the same chart's default render).
	manifests := filepath.Join(dir, "deploy")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	tagAt := strings.LastIndex(testbed.ProberImage, ":")
	repo, tag := testbed.ProberImage[:tagAt], testbed.ProberImage[tagAt+1:]
	hops := map[string]any{}
	for k, v := range c.Fabric.Hops() {
		hops[k] = v
	}
	rendered, _, err := charts.Render(peerstest.RepoFile(t, "charts/prober"), "prober", "prober", map[string]any{
		"namespace": map[string]any{"create": true},
		"image":     map[string]any{"repository": repo, "tag": tag},
		"matrix": map[string]any{"apiServerLB": netip.AddrPortFrom(c.Fabric.VIP, lab.APIServerPort).String(), "hops": hops,
			"nodeConditions": map[string]any{"enabled": true}, "replicas": 2},
	})
	if err != nil {
		t.Fatalf("render charts/prober: %v", err)
	}
	if err := os.WriteFile(filepath.Join(manifests, "prober.yaml"), []byte(rendered), 0o644); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	if out, err := c.Apply(ctx, manifests); err != nil {
		t.Fatalf("kubectl apply of the chart's render: %v\n%s", err, out)
	}
	for _, w := range []string{"daemonset/prober-node", "daemonset/prober-pod", "deployment/prober-matrix"} {
		if out, err := c.Kubectl(ctx, "-n", "prober", "rollout", "status", w, "--timeout=2m"); err != nil {
			t.Fatalf("%s not Ready within 2 minutes: %v\n%s", w, err, out)
		}
	}
	t.Logf("every prober pod Ready %v after kubectl apply", time.Since(applied).Round(time.Second))
	r := &clusterRun{t: t, c: c, matrix: testbed.MatrixClient{Client: matrixClient(ctx, t, c, dir)}, plugins: pluginDir(t, dir, bin["prober"])}
	defer func() {
		for _, f := range r.failed {
			t.Logf("failed: %s", f)
		}
	}()
	if r.matrix.Base, err = r.matrixBase(ctx); err != nil {
		t.Fatal(err)
	}
	r.waitAgents(ctx, t, "the matrix to see every agent")
	r.noAgentToken(ctx, t)
	r.guarded(ctx, t)
	r.noPlainHTTP(ctx, t)
	r.completePlan(ctx, t)

	prom := r.startPrometheus(ctx, kube, dir)

	t.Run("healthy", func(t *testing.T) {
		r.healthy(ctx, t, prom, 3*time.Minute)
		r.alertsQuiet(ctx, t, prom)
		r.wroteNothing(ctx, t)
	})
	if rss, err := c.RSS(); err == nil {
		t.Logf("the cluster's processes (daemons, containers) use %d MiB of RSS", rss>>20)
	}
	// Each phase starts from a clean matrix, also after one that failed.
	phase := func(name string, run func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			if r.t.Failed() {
				r.waitClean(ctx, t, "a clean matrix after the failed phase")
			}
			run(t)
		})
	}
	phase("seed 004: a lossy spine", func(t *testing.T) { r.seed004(ctx, t, prom) })
	phase("seed 001: the API server's LB forgets established flows", func(t *testing.T) { r.seed001(ctx, t, prom) })
	phase("seed 002: a Service loses its endpoints", func(t *testing.T) { r.seed002(ctx, t) })
	phase("a node's NIC drops: its Node condition", func(t *testing.T) { r.hostNIC(ctx, t) })
	phase("the cluster DNS: a CoreDNS pod drops lookups, the Service loses its endpoints", func(t *testing.T) { r.dns(ctx, t) })
	phase("a path MTU black hole", func(t *testing.T) { r.pmtu(ctx, t) })
	phase("churn: a node removed, a prober pod deleted", func(t *testing.T) { r.churn(ctx, t) })
}

// expectedAgents are the names of every agent: each Node's node agent
// (its node name) and each prober-pod pod.
func (r *clusterRun) expectedAgents(ctx context.Context, t *testing.T) []string {
	t.Helper()
	nodes, err := r.c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := r.podAgents(ctx, t)
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// waitAgents waits until the agents the matrix holds fresh are exactly
// those of the cluster: every Node's and every prober-pod pod's.
func (r *clusterRun) waitAgents(ctx context.Context, t *testing.T, what string) {
	t.Helper()
	agents := r.expectedAgents(ctx, t)
	r.waitFor(ctx, t, time.Minute, what, func(v testbed.MatrixView, _ matrix.Diagnosis) error {
		var fresh []string
		for _, a := range v.Agents {
			if a.State == "fresh" {
				fresh = append(fresh, a.Name)
			}
		}
		slices.Sort(fresh)
		if !slices.Equal(fresh, agents) {
			return fmt.Errorf("fresh agents %v, want %v", fresh, agents)
		}
		return nil
	})
}

// healthy watches the matrix for d: no suspect at any time, cells of
// every protocol, cells of each family the cluster has on every path
// between nodes and pods (discovery found each Node's and pod's
// addresses), and, once the agents' first window has passed, no cell
// that loses more than one probe in its window and no more than
// maxIsolated such single losses in the phase. On this 2-core machine
// with a real API server, etcd, four kubelets and their containers, a
// healthy cluster lost one probe in a cell in about one run of two
// (1 of 425 tcp_syn to apiserver-lb, 1 of 118 dns_tcp to a CoreDNS pod,
// each 2-3 minutes in, with no late reply, no probe error and no
// suspect): the machine, not a path. One probe never makes a suspect;
// a lossy path loses more than one of a window's hundreds.
func (r *clusterRun) healthy(ctx context.Context, t *testing.T, prom *testbed.Prometheus, d time.Duration) {
	const maxIsolated = 3
	start := time.Now()
	deadline := start.Add(d)
	strict := start.Add(75 * time.Second) // deploy/'s 60 s window, and a pull
	protos := map[string]bool{}
	families := map[string]bool{}
	seen := map[string]bool{} // cells logged as losing
	isolated := 0
	for time.Now().Before(deadline) {
		v, diag := r.get(ctx, t)
		if len(diag.Suspects) > 0 {
			t.Fatalf("suspect on a healthy cluster: %s", describe(diag))
		}
		for _, cell := range v.Groups {
			protos[cell.Protocol] = true
			families[cell.Path+" "+cell.Family] = true
			if cell.Lost == 0 {
				continue
			}
			what := fmt.Sprintf("%s -> %s %s %s %s lost %d of %d (RTT p50 %.1f ms, p99 %.1f ms)", cell.Source, cell.Target, cell.Path, cell.Protocol, cell.Family,
				cell.Lost, cell.Sent, 1000*cell.RTTP50, 1000*cell.RTTP99)
			into, late := time.Since(start).Round(time.Second), time.Now().After(strict)
			if late && cell.Lost > 1 {
				t.Fatalf("healthy cluster, %v after start-up: %s%s", into, what, r.unanswered(ctx, prom))
			}
			key := cell.Source + cell.Target + cell.Path + cell.Protocol + cell.Family
			if !late {
				key = "starting " + key
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			if !late {
				t.Logf("healthy cluster starting up, %v into the phase: %s (must age out)", into, what)
				continue
			}
			isolated++
			t.Logf("healthy cluster, %v into the phase, a single lost probe: %s%s", into, what, r.unanswered(ctx, prom))
			if isolated > maxIsolated {
				t.Fatalf("healthy cluster: %d cells lost a probe after start-up, at most %d may", isolated, maxIsolated)
			}
		}
		sleep(ctx, 2*time.Second)
	}
	for _, p := range []string{"icmp", "tcp_syn", "http2_ping", "dns_udp", "dns_tcp"} {
		if !protos[p] {
			t.Errorf("no %s cell in the matrix (have %v)", p, protos)
		}
	}
	fams := []string{api.FamilyIPv4}
	if r.c.Fabric.Spec.IPv6 {
		fams = append(fams, api.FamilyIPv6)
	}
	for _, p := range []string{api.PathNodeToNode, api.PathPodToNode, api.PathPodToPod} {
		for _, f := range fams {
			if !families[p+" "+f] {
				t.Errorf("no %s cell over %s in the matrix (have %v)", p, f, slices.Sorted(maps.Keys(families)))
			}
		}
	}
}

// unanswered says what the agents counted beside a lost probe on a
// healthy cluster: replies that came too late or matched nothing, and
// probes that failed to send. A late reply is a stalled peer or host;
// nothing late and no error leaves the path, or a stall that lost the
// reply before the agent read it.
func (r *clusterRun) unanswered(ctx context.Context, prom *testbed.Prometheus) string {
	var b strings.Builder
	for _, q := range []string{
		`sum by (pod, protocol, reason) (increase(prober_replies_unmatched_total[5m])) > 0`,
		`sum by (pod, protocol, reason) (increase(prober_probe_errors_total[5m])) > 0`,
	} {
		samples, err := prom.Client().Query(ctx, q)
		if err != nil {
			fmt.Fprintf(&b, "\n    %s: %v", q, err)
			continue
		}
		for _, s := range samples {
			fmt.Fprintf(&b, "\n    %v: %.0f", s.Metric, s.Value)
		}
		if len(samples) == 0 {
			fmt.Fprintf(&b, "\n    %s: none", q)
		}
	}
	return b.String()
}

// get reads the matrix and its diagnosis, for up to 15 s while they
// cannot be read.
func (r *clusterRun) get(ctx context.Context, t *testing.T) (testbed.MatrixView, matrix.Diagnosis) {
	t.Helper()
	start := time.Now()
	for {
		v, d, err := r.fetch(ctx)
		if err == nil {
			return v, d
		}
		if time.Since(start) > 15*time.Second || ctx.Err() != nil {
			t.Fatal(err)
		}
		sleep(ctx, time.Second)
	}
}

// fetch reads the matrix pod itself, not its Service: when seed 001's
// fault lets a Node go NotReady, the Service loses the pod, which still
// runs. A failed read looks the pod up again (rescheduled by churn).
func (r *clusterRun) fetch(ctx context.Context) (testbed.MatrixView, matrix.Diagnosis, error) {
	read := func() (v testbed.MatrixView, d matrix.Diagnosis, err error) {
		if v, err = r.matrix.Matrix(ctx); err == nil {
			d, err = r.matrix.Diagnosis(ctx)
		}
		return v, d, err
	}
	v, d, err := read()
	if err == nil {
		return v, d, nil
	}
	if base, e := r.matrixBase(ctx); e == nil && base != r.matrix.Base {
		r.matrix.Base = base
		return read()
	}
	return v, d, err
}

// matrixPod is one replica of prober-matrix as the API has it.
type matrixPod struct {
	name, node, ip  string
	ready, deleting bool
}

// url is the base URL of the replica's endpoints: TLS, the chart's
// default.
func (p matrixPod) url() string { return "https://" + net.JoinHostPort(p.ip, "9809") }

// matrixPods lists the matrix's replicas.
func (r *clusterRun) matrixPods(ctx context.Context) ([]matrixPod, error) {
	out, err := r.c.Kubectl(ctx, "-n", "prober", "get", "pods", "-l", "app.kubernetes.io/component=matrix", "-o",
		`jsonpath={range .items[*]}{.metadata.name}|{.spec.nodeName}|{.status.podIP}|{.status.phase}|{.status.conditions[?(@.type=="Ready")].status}|{.metadata.deletionTimestamp}{"\n"}{end}`)
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	var ps []matrixPod
	for line := range strings.Lines(out) {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 6 || f[1] == "" || f[2] == "" { // not scheduled, or no address yet
			continue
		}
		ps = append(ps, matrixPod{name: f[0], node: f[1], ip: f[2], ready: f[3] == "Running" && f[4] == "True", deleting: f[5] != ""})
	}
	return ps, nil
}

// matrixBase is the URL of a running, Ready prober-matrix pod: one just
// started has no diagnosis yet.
func (r *clusterRun) matrixBase(ctx context.Context) (string, error) {
	ps, err := r.matrixPods(ctx)
	if err != nil {
		return "", err
	}
	for _, p := range ps {
		if p.ready && !p.deleting {
			return p.url(), nil
		}
	}
	return "", fmt.Errorf("no running, Ready prober-matrix pod: %+v", ps)
}

// waitFor polls the matrix every 2 s until cond returns nil.
func (r *clusterRun) waitFor(ctx context.Context, t *testing.T, within time.Duration, what string, cond func(testbed.MatrixView, matrix.Diagnosis) error) time.Duration {
	t.Helper()
	start := time.Now()
	var last error
	for time.Since(start) < within {
		v, d, err := r.fetch(ctx)
		if last = err; last == nil {
			if last = cond(v, d); last == nil {
				t.Logf("%s: %v", what, time.Since(start).Round(time.Second))
				return time.Since(start)
			}
		}
		sleep(ctx, 2*time.Second)
	}
	t.Fatalf("%s: not within %v: %v", what, within, last)
	return 0
}

func describe(d matrix.Diagnosis) string {
	var b strings.Builder
	for _, s := range d.Suspects {
		fmt.Fprintf(&b, "\n  %s %s score %.2f est. loss %.3f: %s", s.Kind, s.Name, s.Score, s.EstimatedLoss, s.Evidence.Detail)
	}
	return b.String()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// buildStatic builds each package as a static binary into dir, named
// after the package's last element.
func buildStatic(t *testing.T, dir string, pkgs ...string) map[string]string {
	t.Helper()
	root := filepath.Dir(peerstest.RepoFile(t, "go.mod"))
	out := map[string]string{}
	for _, p := range pkgs {
		name := filepath.Base(p)
		dst := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-trimpath", "-o", dst, p)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", p, err, b)
		}
		out[name] = dst
	}
	return out
}

// testWriter logs each line written to it.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		w.t.Log(line)
	}
	return len(b), nil
}

// noAgentToken: the agents' pods carry no API token: no projected token
// volume, nothing mounted where client-go looks for one.
func (r *clusterRun) noAgentToken(ctx context.Context, t *testing.T) {
	t.Helper()
	out, err := r.c.Kubectl(ctx, "-n", "prober", "get", "pods", "-l", "app.kubernetes.io/component in (node,pod)", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.spec.automountServiceAccountToken} {.spec.volumes[*].name} {.spec.containers[*].volumeMounts[*].mountPath}{"\n"}{end}`)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	pods := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		pods++
		if f := strings.Fields(line); len(f) < 2 || f[1] != "false" || strings.Contains(line, "kube-api-access") || strings.Contains(line, "serviceaccount") {
			t.Errorf("agent pod with an API token: %s", line)
		}
	}
	if pods != 2*len(r.c.Fabric.Nodes()) {
		t.Errorf("%d agent pods, want 2 per node:\n%s", pods, out)
	}
}

// guarded: the agents reach the matrix with their projected tokens and
// the matrix pulls them with its keys (every agent is fresh), while a
// client with neither gets no agent's plan and no agent's observations.
func (r *clusterRun) guarded(ctx context.Context, t *testing.T) {
	t.Helper()
	v, err := r.matrix.Matrix(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range v.Pulls {
		if !p.OK || p.Agent == "" {
			continue
		}
		for _, u := range []string{r.matrix.Base + api.AgentPlanPath + p.Agent + "?wait=0", p.URL + api.ObservationsPath} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			resp, err := r.matrix.Client.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", u, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s without credentials: %s, want 401", u, resp.Status)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Error("no agent pulled: nothing to check")
	}
}

// matrixClient reaches the matrix as the agents do: over TLS, verified
// for the Service's name (whatever pod address is dialled) with the CA
// the chart made, read from its Secret. Plain-HTTP agents' URLs go
// through it too.
func matrixClient(ctx context.Context, t *testing.T, c *testbed.Cluster, dir string) *http.Client {
	t.Helper()
	out, err := c.Kubectl(ctx, "-n", "prober", "get", "secret", "prober-matrix-tls", "-o", `jsonpath={.data.ca\.crt}`)
	if err != nil {
		t.Fatalf("the matrix's CA: %v\n%s", err, out)
	}
	ca, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("the matrix's CA: %v", err)
	}
	file := filepath.Join(dir, "prober-matrix-ca.crt")
	if err := os.WriteFile(file, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	roots, err := tlsfiles.NewRoots(file, nil)
	if err != nil {
		t.Fatalf("the matrix's CA from Secret prober-matrix-tls: %v", err)
	}
	hc := c.HTTPClient(5 * time.Second)
	hc.Transport.(*http.Transport).TLSClientConfig = roots.Config("prober-matrix.prober.svc")
	return hc
}

// noPlainHTTP: the matrix answers plain HTTP with an error, not its
// endpoints: the agents' plans and pull keys cross the network only in
// TLS.
func (r *clusterRun) noPlainHTTP(ctx context.Context, t *testing.T) {
	t.Helper()
	u := "http" + strings.TrimPrefix(r.matrix.Base, "https") + api.DiagnosisPath
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := r.c.HTTPClient(5 * time.Second).Do(req)
	if err != nil {
		r.errorf(t, "GET %s: %v", u, err)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "suspects") {
		r.errorf(t, "GET %s in plain HTTP: %s %.200q; want 400 and no diagnosis", u, resp.Status, body)
	}
}

// completePlan: /api/v1/plan holds every agent, each with targets, each
// probed by another agent, and ?node= agrees with the whole plan.
func (r *clusterRun) completePlan(ctx context.Context, t *testing.T) {
	t.Helper()
	want := r.expectedAgents(ctx, t)
	var last error
	for start := time.Now(); time.Since(start) < 30*time.Second; sleep(ctx, time.Second) {
		v, err := r.matrix.Plan(ctx, "")
		if last = err; err != nil {
			continue
		}
		var got []string
		probed := map[string]int{}
		for _, a := range v.Agents {
			got = append(got, a.Name)
			if len(a.Targets) == 0 {
				last = fmt.Errorf("agent %s has no target", a.Name)
			}
			for _, tg := range a.Targets {
				probed[tg.Name]++
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			last = fmt.Errorf("plan agents %v, want %v", got, want)
			continue
		}
		for _, a := range want {
			if probed[a] == 0 {
				last = fmt.Errorf("nobody probes %s", a)
			}
		}
		if last != nil {
			continue
		}
		node := r.c.Fabric.Nodes()[0].Name
		one, err := r.matrix.Plan(ctx, node)
		if err != nil || len(one.Agents) != 2 || len(one.ProbedBy[node]) != probed[node] {
			t.Fatalf("plan of node %s: %+v, %v; want its 2 agents, probed by %d", node, one, err, probed[node])
		}
		t.Logf("plan: %d agents, node %s probed by %v", len(v.Agents), node, one.ProbedBy[node])
		return
	}
	t.Fatalf("no complete plan within 30s: %v", last)
}
