package testbed_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/dashboards/dashtest"
	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/peers"
	"github.com/netprober/prober/peers/peerstest"
	"github.com/netprober/prober/testbed"
)

// startPrometheus runs upstream Prometheus (hack/kube/build.sh builds it:
// Debian's has no Kubernetes discovery) in the control plane's namespace,
// scraping the cluster with dashboards/prometheus-scrape.yaml, the
// scrape configuration docs/dashboards.md gives users, and evaluating
// the alert rules.
func (r *clusterRun) startPrometheus(ctx context.Context, kube, dir string) *testbed.Prometheus {
	t := r.t
	// Prometheus's own ServiceAccount would get this role in the cluster.
	rbac := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: prometheus}
rules:
  - apiGroups: [""]
    resources: [pods]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: prometheus}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: prometheus}
subjects:
  - {kind: User, name: prometheus, apiGroup: rbac.authorization.k8s.io}
`
	if out, err := r.c.KubectlStdin(ctx, []byte(rbac), "apply", "-f", "-"); err != nil {
		r.fatalf(t, "prometheus RBAC: %v\n%s", err, out)
	}
	server, ca, token, err := r.c.Credentials("prometheus")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(peerstest.RepoFile(t, "dashboards/prometheus-scrape.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var scrape struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.UnmarshalStrict(b, &scrape); err != nil {
		r.fatalf(t, "dashboards/prometheus-scrape.yaml: %v", err)
	}
	for _, job := range scrape.ScrapeConfigs {
		// From outside the cluster: the API server, its CA, a token.
		sds, _ := job["kubernetes_sd_configs"].([]any)
		for _, sd := range sds {
			m := sd.(map[string]any)
			m["api_server"] = server
			m["tls_config"] = map[string]any{"ca_file": ca}
			m["authorization"] = map[string]any{"credentials_file": token}
		}
		job["scrape_interval"], job["scrape_timeout"] = "2s", "1500ms"
	}
	// On a node, as a host-network Prometheus: on an overlay only the
	// nodes reach pod addresses. The first node is never removed (churn).
	prom, err := testbed.StartPrometheus(ctx, r.c.Fabric, testbed.PrometheusSpec{
		Host: r.c.Fabric.Nodes()[0].Name, Path: kube + "/prometheus", TempDir: dir,
		Config: map[string]any{
			"global":         map[string]string{"scrape_interval": "2s", "evaluation_interval": "2s"},
			"rule_files":     []string{peerstest.RepoFile(t, "dashboards/alerts.yaml")},
			"scrape_configs": scrape.ScrapeConfigs,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := prom.Close(); err != nil {
			r.errorf(t, "prometheus: %v", err)
		}
	})
	return prom
}

// evidence says what a suspect was named on: its counts and its example
// flows (pair, path class, protocol, family, probes, traced hops), so a
// CI log's tail shows which flows put an innocent on the list.
func evidence(s matrix.Suspect) string {
	e := s.Evidence
	var b strings.Builder
	fmt.Fprintf(&b, "stage %s, %.0f of %.0f probes lost, %d lossy and %d clean flows, links %v", e.Stage, e.LostProbes, e.SentProbes, e.LossyFlows, e.CleanFlows, e.Links)
	for i, ex := range e.Examples {
		if i == 6 {
			break
		}
		fmt.Fprintf(&b, "\n    %s -> %s %s %s %s sport %d: lost %d of %d, hops %v", ex.Source, ex.Target, ex.Path, ex.Protocol, ex.Family, ex.SourcePort, ex.Lost, ex.Sent, ex.Hops)
	}
	return b.String()
}

// innocent reports whether s names something other than the device
// culprit, one of its links or its tier, and, when ties, is not tied
// with one of them. The tier is true of the culprit, only less precise:
// on an overlay the pods' flows cross the spines where no trace of
// theirs shows, and before the nodes' own flows have lost enough to
// tell which spine, a family may say the tier. A tie is too: on few
// flows a spine's loss on replies, whose path no trace shows, reads as
// the other spine's, and the matrix says it cannot tell them apart.
// Once the culprit is named alone, both must go (seed004's alone).
func innocent(s matrix.Suspect, culprit, tier string, ties bool) bool {
	if !names(s.Kind, s.Name, culprit, tier) {
		return false
	}
	if !ties {
		return true
	}
	for _, t := range s.Evidence.Ties {
		if !names(t.Kind, t.Name, culprit, "") {
			return false
		}
	}
	return true
}

// names reports whether a suspect of kind and name is something other
// than culprit, one of its links or tier.
func names(kind, name, culprit, tier string) bool {
	switch kind {
	case matrix.KindDevice:
		return name != culprit
	case matrix.KindLink:
		from, to, _ := strings.Cut(name, "->")
		return from != culprit && to != culprit
	case matrix.KindTier:
		return tier == "" || name != tier
	}
	return true
}

// seed004 is seed 004's fault: some devices in one layer drop packets;
// here one spine drops 5% of what it forwards. The matrix must name it
// within 60 s and never list an innocent suspect at 0.1 or more (its
// tier, or a suspect tied with it, only until it is named alone); then
// every dashboard panel must return data in the real Prometheus and the
// suspect alert must trip for the spine.
func (r *clusterRun) seed004(ctx context.Context, t *testing.T, prom *testbed.Prometheus) {
	const spine = "spine1"
	fault := lab.Fault{Kind: lab.FaultDeviceLoss, Device: spine, Permille: 50}
	r.inject(ctx, t, fault)
	start := time.Now()
	// named: the spine is the top suspect, perhaps tied with its own
	// links while the window holds little of the fault; alone: nothing
	// else scores 0.1.
	var named, alone time.Duration
	tierSaid := false
	for time.Since(start) < 60*time.Second || named > 0 && time.Since(start) < named+30*time.Second {
		_, d := r.get(ctx, t)
		others := 0
		for _, s := range d.Listed() {
			if innocent(s, spine, "spine", alone == 0) || alone > 0 && s.Kind == matrix.KindTier {
				r.capture(ctx, t, "seed004 "+s.Kind+" "+s.Name)
				r.fatalf(t, "%v after %s: an innocent suspect scores %.2f: %s\n  its evidence: %s", time.Since(start).Round(time.Second), fault, s.Score, describe(d), evidence(s))
			}
			if s.Kind == matrix.KindTier && !tierSaid {
				tierSaid = true
				t.Logf("the spine tier listed %v after the fault, before %s stood alone: %s", time.Since(start).Round(time.Second), spine, describe(d))
			}
			if s.Kind != matrix.KindDevice || s.Name != spine {
				others++
			}
		}
		top := len(d.Suspects) > 0 && d.Suspects[0].Kind == matrix.KindDevice && d.Suspects[0].Name == spine
		if named == 0 && top {
			named = time.Since(start)
			t.Logf("the matrix names %s %v after the fault: %s", spine, named.Round(time.Second), describe(d))
		}
		if alone == 0 && top && others == 0 {
			alone = time.Since(start)
			t.Logf("%s alone: %v after the fault", spine, alone.Round(time.Second))
		}
		sleep(ctx, 2*time.Second)
	}
	if named == 0 || alone == 0 || alone > 60*time.Second {
		_, d := r.get(ctx, t)
		r.fatalf(t, "%s not named alone within 60 s (named after %v, alone after %v): %s", spine, named, alone, describe(d))
	}
	r.checkDashboards(ctx, t, prom, spine)
	r.kubectlPlugin(ctx, t, spine)
	r.clear(ctx, t)
	r.kubectlTraceAndPage(ctx, t)
}

// checkDashboards asks the real Prometheus every dashboard panel's and
// variable's query, and checks the alerts, while spine is lossy.
func (r *clusterRun) checkDashboards(ctx context.Context, t *testing.T, prom *testbed.Prometheus, spine string) {
	o := dashtest.Options{
		URL: prom.URL(), Client: prom.Client().HTTP, Dashboards: os.DirFS(peerstest.RepoFile(t, "dashboards")),
		Values: map[string]string{"node": "n11", "path": "node_to_node", "protocol": "tcp_syn",
			"__rate_interval": "8s", "__interval": "2s", "__range": "1m"},
		// The rules' for: durations are minutes: pending is enough here.
		Firing: []dashtest.Alert{
			{Name: "ProberSuspect", Match: func(l map[string]string) bool { return l["name"] == spine && l["severity"] == "warning" }},
			// 5% on one of two spines: pairs lose well above the SLA's 1e-3.
			{Name: "ProberLossAboveSLA", Match: func(l map[string]string) bool { return l["severity"] == "critical" && l["path"] != "" }},
		},
		Quiet: []string{"ProberMatrixAbsent", "ProberAgentsMissing", "ProberEstablishedFlowBlackhole"},
		// Error counters exist once something failed: a lossy spine may
		// or may not fail an HTTP/2 dial or a pull, and does not make the
		// DNS answer with errors. Nothing names a node.
		MayLack: map[string]string{
			"prober_probe_errors_total":        "no probe failed locally",
			"prober_matrix_pull_errors_total":  "no pull failed",
			"prober_probe_answer_errors_total": "the cluster DNS answered every lookup it got",
		},
		Empty: map[string]string{"Suspects naming $node": "only " + spine + " is suspected"},
	}
	deadline := time.Now().Add(90 * time.Second)
	var problems, notes []string
	for {
		problems, notes = dashtest.Check(ctx, o)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		sleep(ctx, 3*time.Second)
	}
	for _, n := range notes {
		t.Log(n)
	}
	for _, p := range problems {
		r.errorf(t, "dashboards in the real cluster's Prometheus: %s", p)
	}
}

// seed001 is seed 001's fault on the real path: the LB in front of the
// API server, through which the kubelets reach it, forgets the flows it
// tracked; new flows pass. Most node agents must report the black hole
// within 10 s with tcp_syn to the VIP clean, the matrix name an lb, and
// prober be first: before the kubelets' own HTTP/2 health check notices
// (about 45 s) and before any Node goes NotReady.
func (r *clusterRun) seed001(ctx context.Context, t *testing.T, prom *testbed.Prometheus) {
	nodes := r.c.Fabric.Nodes()
	fault := lab.Fault{Kind: lab.FaultLBForget}
	r.inject(ctx, t, fault)
	start := time.Now()
	var agents, lb, notReady, alert time.Duration
	reporting := 0
	notReadyNode := ""
	told := map[string]bool{} // suspects whose whole evidence was logged
	for time.Since(start) < 90*time.Second {
		if agents == 0 || time.Since(start) < 20*time.Second {
			n := 0
			for _, h := range nodes {
				obs, err := r.observations(ctx, h)
				if err != nil {
					t.Fatal(err)
				}
				for _, tg := range obs.Targets {
					if tg.Name == "apiserver-lb" && tg.EstablishedFlowBlackhole {
						n++
					}
				}
			}
			// Most, not all: the API server ends a connection that only
			// carries PINGs every 90 s, and one redialled after the fault
			// is a new flow, which the LB passes (a kubelet that
			// reconnected would be fine too).
			reporting = max(reporting, n)
			if agents == 0 && 2*n >= len(nodes) {
				agents = time.Since(start)
			} else if agents == 0 && time.Since(start) > 10*time.Second {
				r.fatalf(t, "%d of %d node agents report the established-flow black hole 10 s after %s", n, len(nodes), fault)
			}
		}
		v, d := r.get(ctx, t)
		for _, c := range v.Groups {
			if c.Target == "apiserver-lb" && c.Protocol == "tcp_syn" && c.Lost > 0 {
				r.fatalf(t, "tcp_syn %s -> %s lost %d of %d under %s: new flows must pass", c.Source, c.Target, c.Lost, c.Sent, fault)
			}
		}
		if lb == 0 && slices.ContainsFunc(d.Suspects, func(s matrix.Suspect) bool { return s.Kind == matrix.KindLB }) {
			lb = time.Since(start)
		}
		for _, s := range d.Listed() {
			if s.Kind != matrix.KindLB {
				why := s.Evidence.Detail
				if !told[s.Kind+" "+s.Name] {
					told[s.Kind+" "+s.Name] = true
					r.capture(ctx, t, "seed001 "+s.Kind+" "+s.Name)
					why += "\n  its evidence: " + evidence(s)
				}
				r.errorf(t, "%v under %s the matrix also names %s %s (%.2f): %s", time.Since(start).Round(time.Second), fault, s.Kind, s.Name, s.Score, why)
			}
		}
		if alert == 0 && r.alertActive(ctx, t, prom, dashtest.Alert{Name: "ProberEstablishedFlowBlackhole", Match: func(l map[string]string) bool {
			return l["target"] == "apiserver-lb" && l["severity"] == "critical"
		}}) {
			alert = time.Since(start)
		}
		if notReady == 0 {
			states, err := r.c.Nodes(ctx)
			if err == nil {
				for name, st := range states {
					if st != "True" {
						notReady, notReadyNode = time.Since(start), name
					}
				}
			}
		}
		if agents > 0 && lb > 0 && time.Since(start) > 60*time.Second {
			break // the kubelets have had their 45 s
		}
		sleep(ctx, time.Second)
	}
	lease, lost := r.kubeletNoticed(t, start)
	t.Logf("seed 001: half the node agents report the black hole %v after the fault (%d of %d within 20 s), the matrix names the LB %v after; "+
		"kubelets: first failed lease renewal %s, HTTP/2 connection declared lost %s; first Node NotReady: %s",
		agents.Round(100*time.Millisecond), reporting, len(nodes), lb.Round(100*time.Millisecond), since(lease, start), since(lost, start),
		map[bool]string{true: fmt.Sprintf("%s after %v", notReadyNode, notReady.Round(time.Second)), false: "none within 90 s"}[notReady > 0])
	if lb == 0 {
		r.errorf(t, "the matrix named no lb under %s", fault)
	}
	// The black-hole alert, with its routing labels, in the real
	// Prometheus: pending is enough (its for: is a minute).
	if alert == 0 {
		r.errorf(t, "ProberEstablishedFlowBlackhole{target=\"apiserver-lb\", severity=\"critical\"} neither pending nor firing within 90 s of %s", fault)
	} else {
		t.Logf("seed 001: ProberEstablishedFlowBlackhole pending %v after the fault", alert.Round(time.Second))
	}
	if notReady > 0 && notReady <= agents {
		r.errorf(t, "a Node went NotReady (%v) before prober reported (%v)", notReady, agents)
	}
	if !lost.IsZero() && lost.Sub(start) <= agents {
		r.errorf(t, "a kubelet noticed (%v) before prober (%v)", lost.Sub(start), agents)
	}
	r.clear(ctx, t)
	r.waitFor(ctx, t, 2*time.Minute, "every Node Ready again", func(testbed.MatrixView, matrix.Diagnosis) error {
		states, err := r.c.Nodes(ctx)
		if err != nil {
			return err
		}
		for name, st := range states {
			if st != "True" {
				return fmt.Errorf("%s is %s", name, st)
			}
		}
		return nil
	})
}

// alertActive reports whether alert want is pending or firing in prom.
func (r *clusterRun) alertActive(ctx context.Context, t *testing.T, prom *testbed.Prometheus, want dashtest.Alert) bool {
	rules, err := prom.Client().AlertingRules(ctx)
	if err != nil {
		r.fatalf(t, "alerting rules: %v", err)
	}
	return dashtest.Tripped(rules, want)
}

// alertsQuiet fails unless every alerting rule is loaded, healthy and
// neither pending nor firing: a healthy cluster pages nobody.
func (r *clusterRun) alertsQuiet(ctx context.Context, t *testing.T, prom *testbed.Prometheus) {
	rules, err := prom.Client().AlertingRules(ctx)
	if err != nil {
		r.fatalf(t, "alerting rules: %v", err)
	}
	want, err := dashtest.LoadRules(os.DirFS(peerstest.RepoFile(t, "dashboards")), "alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[string]bool{}
	for _, rule := range rules {
		loaded[rule.Name] = true
	}
	for _, w := range want {
		if !loaded[w.Alert] {
			r.errorf(t, "alert %s of dashboards/alerts.yaml is not loaded", w.Alert)
		}
	}
	for _, rule := range rules {
		if rule.Health != "ok" {
			r.errorf(t, "alert %s: health %q (%s)", rule.Name, rule.Health, rule.LastError)
		}
		for _, a := range rule.Alerts {
			r.errorf(t, "healthy cluster: alert %s %s %v", rule.Name, a.State, a.Labels)
		}
	}
}

// kubeletNoticed reads the kubelets' logs for their first failed lease
// renewal and their first HTTP/2 connection declared lost after start.
func (r *clusterRun) kubeletNoticed(t *testing.T, start time.Time) (lease, lost time.Time) {
	// klog: "E1124 03:35:11.459605 ..." in local time, no year.
	header := regexp.MustCompile(`^[IWEF](\d{4} \d{2}:\d{2}:\d{2}\.\d{6})`)
	first := func(at *time.Time, ts time.Time) {
		if ts.After(start) && (at.IsZero() || ts.Before(*at)) {
			*at = ts
		}
	}
	for _, h := range r.c.Fabric.Nodes() {
		f, err := os.Open(r.c.LogPath(h.Name, "kubelet"))
		if err != nil {
			t.Error(err)
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			m := header.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			ts, err := time.ParseInLocation("2006 0102 15:04:05.000000", fmt.Sprint(start.Year())+" "+m[1], time.Local)
			if err != nil {
				continue
			}
			switch {
			case strings.Contains(line, "Failed to update lease"):
				first(&lease, ts)
			case strings.Contains(line, "http2: client connection lost"):
				first(&lost, ts)
			}
		}
		f.Close()
	}
	return lease, lost
}

func since(at, start time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return fmt.Sprintf("%v after", at.Sub(start).Round(100*time.Millisecond))
}

// seed002 is seed 002's fault: a Service's endpoints vanish while its
// pods stay Ready (here its selector changes, as the endpoints
// controller's bug had the same effect). The VIP fails, the direct paths
// to its pods stay clean, and the matrix names the Service, not the
// fabric; with the endpoints back the suspect clears.
func (r *clusterRun) seed002(ctx context.Context, t *testing.T) {
	const svc = "prober/web"
	manifest := `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: prober
  annotations: {prober.netprober.io/probe: "true"}
spec:
  selector: {app.kubernetes.io/name: prober, app.kubernetes.io/component: pod}
  ports:
    - {name: http, port: 80, targetPort: 9808, protocol: TCP}
`
	if out, err := r.c.KubectlStdin(ctx, []byte(manifest), "apply", "-f", "-"); err != nil {
		r.fatalf(t, "%v\n%s", err, out)
	}
	defer r.c.Kubectl(ctx, "-n", "prober", "delete", "service", "web", "--wait=false")
	pods := r.podAgents(ctx, t)
	// A new Service is silent: its first probes, before kube-proxy has
	// programmed it on every node, are no loss.
	r.waitFor(ctx, t, 90*time.Second, "the agents probing "+svc+" and reporting its backends", func(v testbed.MatrixView, d matrix.Diagnosis) error {
		if len(d.Suspects) > 0 {
			r.fatalf(t, "a new Service raised a suspect: %s", describe(d))
		}
		n := 0
		for _, c := range v.Groups {
			if c.Target == svc && c.Protocol == "tcp_syn" && c.Sent > 0 {
				n++
			}
		}
		if n < len(r.c.Fabric.Nodes()) {
			return fmt.Errorf("%d sources probe %s", n, svc)
		}
		obs, err := r.observations(ctx, r.c.Fabric.Nodes()[0])
		if err != nil {
			return err
		}
		for _, tg := range obs.Targets {
			if tg.Name == svc {
				if !slices.Equal(tg.Backends, pods) {
					return fmt.Errorf("backends %v, want %v", tg.Backends, pods)
				}
				return nil
			}
		}
		return fmt.Errorf("no target %s", svc)
	})
	if out, err := r.c.Kubectl(ctx, "-n", "prober", "patch", "service", "web", "-p", `{"spec":{"selector":{"app.kubernetes.io/component":"none"}}}`); err != nil {
		r.fatalf(t, "%v\n%s", err, out)
	}
	start := time.Now()
	r.waitLBNamed(ctx, t, svc, func(v testbed.MatrixView) {
		for _, c := range v.Groups {
			if strings.HasSuffix(c.Path, "_to_pod") && c.Lost > 0 {
				r.fatalf(t, "%s -> %s (%s %s) lost %d: the pods' direct paths must stay clean", c.Source, c.Target, c.Path, c.Protocol, c.Lost)
			}
		}
	})
	t.Logf("seed 002: %s named %v after its endpoints vanished", svc, time.Since(start).Round(time.Second))
	// The matrix's Event on the Service (matrix.nodeConditions).
	for want := "Service/" + svc + " " + peers.ReasonServiceLoss; !slices.Contains(r.matrixEvents(ctx, t), want); sleep(ctx, 2*time.Second) {
		if time.Since(start) > 2*time.Minute {
			r.errorf(t, "no Event %q: %v", want, r.matrixEvents(ctx, t))
			break
		}
	}
	if out, err := r.c.Kubectl(ctx, "-n", "prober", "patch", "service", "web", "-p", `{"spec":{"selector":{"app.kubernetes.io/component":"pod"}}}`); err != nil {
		r.fatalf(t, "%v\n%s", err, out)
	}
	r.waitClean(ctx, t, "the suspect clears with the endpoints back")
}

// churn takes a node out of the cluster (drained, deleted, powered off)
// and deletes a prober pod elsewhere: neither may count as loss, nor
// raise a suspect.
func (r *clusterRun) churn(ctx context.Context, t *testing.T) {
	ms, err := r.matrixPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The node to remove runs no CoreDNS pod (the phase is about agents
	// and nodes leaving, not the DNS moving) and not the matrix replica
	// the test reads; the other replica, if there, is drained with it,
	// as a PodDisruptionBudget allows, while this one serves.
	matrixNodes, readNode := map[string]bool{}, ""
	for _, p := range ms {
		matrixNodes[p.node] = true
		if p.url() == r.matrix.Base {
			readNode = p.node
		}
	}
	dnsNodes := map[string]bool{}
	for _, ep := range r.dnsEndpoints(ctx, t) {
		dnsNodes[ep.node] = true
	}
	var gone, other string
	for _, free := range []bool{true, false} { // a node without a replica first
		for _, h := range slices.Backward(r.c.Fabric.Nodes()) {
			if gone == "" && h.Name != readNode && !dnsNodes[h.Name] && (!free || !matrixNodes[h.Name]) {
				gone = h.Name
			}
		}
	}
	for _, h := range slices.Backward(r.c.Fabric.Nodes()) {
		if other == "" && h.Name != gone {
			other = h.Name
		}
	}
	if gone == "" || readNode == "" {
		r.fatalf(t, "no node to remove (matrix replicas on %v, the one read on %q; CoreDNS on %v)", matrixNodes, readNode, dnsNodes)
	}
	pod, err := r.c.Kubectl(ctx, "-n", "prober", "get", "pods", "-l", "app.kubernetes.io/component=pod",
		"--field-selector", "spec.nodeName="+other, "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// An operator powers a machine off some seconds after deleting its
	// Node, not in the same instant.
	if err := r.c.RemoveNode(ctx, gone, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	pod = strings.TrimSpace(pod)
	if out, err := r.c.Kubectl(ctx, "-n", "prober", "delete", "pod", "--wait=false", pod); err != nil {
		r.fatalf(t, "%v\n%s", err, out)
	}
	r.leavesPlan(ctx, t, pod, 2*time.Second)
	with := ""
	if matrixNodes[gone] {
		with = " (with a matrix replica, while the other served)"
	}
	t.Logf("%s drained%s, deleted and powered off, %s deleted, in %v", gone, with, pod, time.Since(start).Round(time.Second))
	if out, err := r.c.Kubectl(ctx, "-n", "prober", "rollout", "status", "daemonset/prober-pod", "--timeout=2m"); err != nil {
		r.fatalf(t, "%v\n%s", err, out)
	}
	// A window from the churn: anything lost then would still show.
	for time.Since(start) < 75*time.Second {
		v, d := r.get(ctx, t)
		if len(d.Suspects) > 0 {
			r.fatalf(t, "suspect after churn: %s", describe(d))
		}
		for _, c := range v.Groups {
			if c.Lost > 0 {
				r.fatalf(t, "after churn: %s -> %s %s %s lost %d of %d", c.Source, c.Target, c.Path, c.Protocol, c.Lost, c.Sent)
			}
		}
		sleep(ctx, 2*time.Second)
	}
	r.waitAgents(ctx, t, "the matrix to see exactly the agents left")
}

// dnsEndpoint is a CoreDNS pod of the cluster's DNS.
type dnsEndpoint struct{ name, node, ip string }

// dnsEndpoints are the CoreDNS pods, by name.
func (r *clusterRun) dnsEndpoints(ctx context.Context, t *testing.T) []dnsEndpoint {
	out, err := r.c.Kubectl(ctx, "-n", testbed.DNSNamespace, "get", "pods", "-l", "k8s-app=kube-dns", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.podIP}{"\n"}{end}`)
	if err != nil {
		r.fatalf(t, "%v\n%s", err, out)
	}
	var eps []dnsEndpoint
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) == 3 {
			eps = append(eps, dnsEndpoint{f[0], f[1], f[2]})
		}
	}
	if len(eps) == 0 {
		r.fatalf(t, "no CoreDNS pod: %q", out)
	}
	return eps
}

// dns is the three faults on the cluster's DNS (the lossy spine
// is seed 004's phase, with the DNS asked throughout): every agent asks
// the DNS Service and each CoreDNS pod; one pod dropping a fifth of the
// UDP lookups that reach it is named alone, not the fabric, not the
// Service; the Service losing its endpoints is named as an LB, the pods'
// direct paths clean.
func (r *clusterRun) dns(ctx context.Context, t *testing.T) {
	vip := testbed.DNSNamespace + "/" + testbed.DNSService
	eps := r.dnsEndpoints(ctx, t)
	ep := eps[0]
	culprit := testbed.DNSNamespace + "/" + ep.name
	r.waitFor(ctx, t, 90*time.Second, "every node asking "+vip+" over UDP and TCP", func(v testbed.MatrixView, d matrix.Diagnosis) error {
		if len(d.Suspects) > 0 {
			r.fatalf(t, "a suspect while the DNS is healthy: %s", describe(d))
		}
		asked := map[string]int{}
		for _, c := range v.Groups {
			if c.Target == vip && c.Sent > 0 {
				if c.Lost > 0 {
					r.fatalf(t, "%s -> %s %s lost %d of %d while the DNS is healthy", c.Source, c.Target, c.Protocol, c.Lost, c.Sent)
				}
				asked[c.Protocol]++
			}
		}
		if n := len(r.c.Fabric.Nodes()); asked[api.ProtocolDNSUDP] < n || asked[api.ProtocolDNSTCP] < n {
			return fmt.Errorf("sources asking over udp %d, tcp %d, want %d each", asked[api.ProtocolDNSUDP], asked[api.ProtocolDNSTCP], n)
		}
		return nil
	})

	// One CoreDNS pod drops a fifth of the UDP lookups that reach it.
	r.inject(ctx, t, lab.Fault{Kind: lab.FaultPortLoss, Host: ep.node, Proto: "udp", Port: 53, Addr: ep.ip, Permille: 200})
	start := time.Now()
	r.waitFor(ctx, t, 90*time.Second, "the matrix to name "+culprit, func(v testbed.MatrixView, d matrix.Diagnosis) error {
		listed := d.Listed()
		if len(listed) == 0 || listed[0].Kind != matrix.KindHost || listed[0].Name != culprit {
			return fmt.Errorf("suspects:%s", describe(d))
		}
		for _, s := range listed[1:] {
			r.fatalf(t, "%s listed beside %s: %s", s.Name, culprit, describe(d))
		}
		return nil
	})
	t.Logf("dns: CoreDNS pod %s (on %s) named %v after it began dropping UDP lookups", culprit, ep.node, time.Since(start).Round(time.Second))
	r.clear(ctx, t)

	// The Service loses its endpoints (seed 002 on the DNS).
	patch := func(component string) {
		if out, err := r.c.Kubectl(ctx, "-n", testbed.DNSNamespace, "patch", "service", testbed.DNSService, "-p", `{"spec":{"selector":{"k8s-app":"`+component+`"}}}`); err != nil {
			r.fatalf(t, "%v\n%s", err, out)
		}
	}
	patch("none")
	defer patch("kube-dns")
	start = time.Now()
	r.waitLBNamed(ctx, t, vip, nil)
	t.Logf("dns: %s named %v after its endpoints vanished", vip, time.Since(start).Round(time.Second))
	patch("kube-dns")
	r.waitClean(ctx, t, "the suspect clears with the DNS's endpoints back")
}

// waitLBNamed waits up to 60 s for the Service svc to be the top
// suspect, as an lb, failing at once when anything but an lb is listed;
// check, when set, sees every matrix read first.
func (r *clusterRun) waitLBNamed(ctx context.Context, t *testing.T, svc string, check func(testbed.MatrixView)) {
	r.waitFor(ctx, t, 60*time.Second, "the matrix to name "+svc, func(v testbed.MatrixView, d matrix.Diagnosis) error {
		if check != nil {
			check(v)
		}
		for _, s := range d.Listed() {
			if s.Kind != matrix.KindLB {
				r.fatalf(t, "not an lb is blamed: %s", describe(d))
			}
		}
		if len(d.Suspects) == 0 || d.Suspects[0].Kind != matrix.KindLB || d.Suspects[0].Name != svc {
			return fmt.Errorf("suspects:%s", describe(d))
		}
		return nil
	})
}

func (r *clusterRun) inject(ctx context.Context, t *testing.T, f lab.Fault) {
	if err := r.c.Fabric.Inject(ctx, f); err != nil {
		t.Fatal(err)
	}
	// A phase that fails leaves no fault to the next.
	t.Cleanup(func() { r.c.Fabric.Clear(context.WithoutCancel(ctx)) })
	t.Logf("injected %s", f)
}

// clear removes the faults and waits for a clean matrix.
func (r *clusterRun) clear(ctx context.Context, t *testing.T) {
	if err := r.c.Fabric.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	r.waitClean(ctx, t, "a clean matrix after the fault")
}

// waitClean waits until no suspect and no lost probe remain: the windows
// must forget the fault (one window, 60 s by default, and the black-hole
// report's hold).
func (r *clusterRun) waitClean(ctx context.Context, t *testing.T, what string) {
	r.waitFor(ctx, t, 150*time.Second, what, func(v testbed.MatrixView, d matrix.Diagnosis) error {
		if len(d.Suspects) > 0 {
			return fmt.Errorf("suspects:%s", describe(d))
		}
		for _, c := range v.Groups {
			if c.Lost > 0 {
				return fmt.Errorf("%s -> %s %s lost %d", c.Source, c.Target, c.Protocol, c.Lost)
			}
		}
		return nil
	})
}

// podAgents are the prober-pod pods' names, sorted.
func (r *clusterRun) podAgents(ctx context.Context, t *testing.T) []string {
	out, err := r.c.Kubectl(ctx, "-n", "prober", "get", "pods", "-l", "app.kubernetes.io/component=pod", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.metadata.deletionTimestamp}{"\n"}{end}`)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := r.c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A pod of a deleted Node stays in the API until the pod garbage
	// collector gets to it (up to a minute on 2 cores): it is no agent.
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 {
			if _, ok := nodes[f[1]]; ok {
				names = append(names, f[0])
			}
		}
	}
	slices.Sort(names)
	return names
}

// observations reads a node agent's report through the fabric, with the
// key the matrix pulls it with (pullKey).
func (r *clusterRun) observations(ctx context.Context, node lab.Host) (api.Observations, error) {
	var obs api.Observations
	key, err := r.pullKey(ctx, node.Name)
	if err != nil {
		return obs, err
	}
	err = getJSON(ctx, r.c, "http://"+netip.AddrPortFrom(node.Addr, 9808).String()+api.ObservationsPath, &obs, key)
	return obs, err
}

// pullKey gets the key the matrix pulls node's agent with, as the agent
// does: a token of the agent's pod (kubectl create token, as the kubelet
// projects it) on a request for its plan.
func (r *clusterRun) pullKey(ctx context.Context, node string) (string, error) {
	if k := r.keys[node]; k != "" {
		return k, nil
	}
	pod, err := r.c.Kubectl(ctx, "-n", "prober", "get", "pods", "-l", "app.kubernetes.io/component=node",
		"--field-selector", "spec.nodeName="+node, "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil {
		return "", fmt.Errorf("node agent pod on %s: %v: %s", node, err, pod)
	}
	return r.agentKey(ctx, node, pod)
}

// agentKey gets the pull key of the agent named name, which runs in pod,
// with a token of that pod; pullKey's cache holds it by name.
func (r *clusterRun) agentKey(ctx context.Context, name, pod string) (string, error) {
	if k := r.keys[name]; k != "" {
		return k, nil
	}
	tok, err := r.c.Kubectl(ctx, "-n", "prober", "create", "token", config.DefaultAgentServiceAccount, "--audience", api.AgentTokenAudience,
		"--bound-object-kind", "Pod", "--bound-object-name", strings.TrimSpace(pod), "--duration", "1h")
	if err != nil {
		return "", fmt.Errorf("token for %s: %v: %s", pod, err, tok)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.matrix.Base+api.AgentPlanPath+name+"?wait=0", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
	resp, err := r.matrix.Client.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	key := resp.Header.Get(api.PullKeyHeader)
	if resp.StatusCode != http.StatusOK || key == "" {
		return "", fmt.Errorf("%s's plan with its pod's token: %s, pull key %q", name, resp.Status, key)
	}
	if r.keys == nil {
		r.keys = map[string]string{}
	}
	r.keys[name] = key
	return key, nil
}

// getJSON GETs url into v, presenting key as the matrix does.
func getJSON(ctx context.Context, c *testbed.Cluster, url string, v any, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	client := c.HTTPClient(5 * time.Second)
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// leavesPlan: a deleted agent leaves every agent's plan within d of the
// deletion (the matrix sees the pod terminating, rebuilds, and answers the
// agents' held polls).
func (r *clusterRun) leavesPlan(ctx context.Context, t *testing.T, agent string, d time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		v, err := r.matrix.Plan(ctx, "")
		held := 0
		for _, a := range v.Agents {
			for _, tg := range a.Targets {
				if tg.Name == agent {
					held++
				}
			}
		}
		if err == nil && held == 0 {
			took := time.Since(start)
			t.Logf("%s left every plan %v after its deletion", agent, took.Round(10*time.Millisecond))
			if took > d {
				r.errorf(t, "%s left the plans after %v, want within %v", agent, took, d)
			}
			return
		}
		if time.Since(start) > 10*d {
			r.fatalf(t, "%s still in %d plans %v after its deletion (%v)", agent, held, time.Since(start), err)
		}
		sleep(ctx, 100*time.Millisecond)
	}
}
