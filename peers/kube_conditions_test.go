package peers_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/charts"
	"github.com/netprober/prober/peers"
	"github.com/netprober/prober/peers/peerstest"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestKubeNodeConditions runs the Reporter against a real API server
// under the chart's node conditions RBAC (matrix.nodeConditions.enabled,
// rendered and applied, bound to a ServiceAccount of the test's): a host
// and a dataplane suspect set the condition on their Nodes with an Event
// each, which kubectl describe node shows; the bound (4 writes a minute
// here) holds the Service's Event back until a minute has passed; the
// conditions clear a minute after the suspects go; a new matrix clears
// what an earlier one left only after it has not listed the node for a
// minute itself; a diagnosis naming nothing writes nothing.
func TestKubeNodeConditions(t *testing.T) {
	s, admin, client, ps := conditionsCluster(t, "conditions", "cond-1", "cond-2", "cond-3")
	ctx := t.Context()
	svc, err := admin.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "cond-web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Services("default").Delete(context.Background(), "cond-web", metav1.DeleteOptions{})
	})
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	clock := &fakeClock{t: time.Now()}
	start := func() (*peers.Reporter, context.CancelFunc) {
		r := peers.NewReporter(client, peers.ReporterConfig{WritesPerMinute: 4, Instance: "prober-matrix-test", Now: clock.now}, log)
		r.SetPeers(ps)
		return r, runReporter(t, r)
	}
	suspect := func(kind, name string) api.Suspect {
		return api.Suspect{Kind: kind, Name: name, Score: 0.5, Evidence: api.Evidence{Detail: "its own links lose 0.1"}}
	}
	r, stop := start()
	r.Observe(api.Diagnosis{Suspects: []api.Suspect{suspect(api.KindHost, "cond-1"), suspect(api.KindDataplane, "cond-2"), suspect(api.KindLB, "default/cond-web")}})
	waitCondition(t, admin, "cond-1", corev1.ConditionTrue, peers.ReasonHostLoss)
	waitCondition(t, admin, "cond-2", corev1.ConditionTrue, peers.ReasonDataplaneLoss)
	waitEvents(t, admin, "Node", "cond-1", peers.ReasonHostLoss)
	waitEvents(t, admin, "Node", "cond-2", peers.ReasonDataplaneLoss)
	out, err := s.Kubectl(ctx, "describe", "node", "cond-1")
	if err != nil || !strings.Contains(out, peers.NodeConditionType) || !strings.Contains(out, peers.ReasonHostLoss) || !strings.Contains(out, "prober: its own links lose 0.1") {
		t.Errorf("kubectl describe node cond-1 shows no condition or Event of prober's: %v\n%s", err, out)
	}
	out, err = s.Kubectl(ctx, "get", "events", "-A", "--field-selector", "reportingComponent="+peers.ReportingController)
	if err != nil || !strings.Contains(out, peers.ReasonHostLoss) || !strings.Contains(out, peers.ReasonDataplaneLoss) {
		t.Errorf("kubectl get events by the matrix's reporting component (docs/kubernetes.md): %v\n%s", err, out)
	}
	// The bound: 4 writes spent on the two nodes, the Service's Event waits.
	time.Sleep(500 * time.Millisecond)
	if n := events(t, admin, "Service", "cond-web"); len(n) != 0 {
		t.Errorf("the Service's Event written within the minute the bound had spent: %v", n)
	}
	waitWrites(t, r, "event/ok=2 node_condition/ok=2", 1) // the Service's Event held
	// The suspects go; a minute on, both clear (4 more writes), and the
	// Event still waits; another minute, and it is written.
	r.Observe(api.Diagnosis{Suspects: []api.Suspect{}})
	clock.add(peers.ClearAfter + time.Second)
	r.Observe(api.Diagnosis{Suspects: []api.Suspect{}})
	waitCondition(t, admin, "cond-1", corev1.ConditionFalse, peers.ReasonNoProblem)
	waitCondition(t, admin, "cond-2", corev1.ConditionFalse, peers.ReasonNoProblem)
	waitEvents(t, admin, "Node", "cond-1", peers.ReasonHostLoss, peers.ReasonNoProblem)
	if n := events(t, admin, "Service", "cond-web"); len(n) != 0 {
		t.Errorf("the Service's Event written beside 4 clears within one minute: %v", n)
	}
	clock.add(time.Minute + time.Second)
	r.Observe(api.Diagnosis{Suspects: []api.Suspect{}})
	evs := waitEvents(t, admin, "Service", "cond-web", peers.ReasonServiceLoss)
	if e := evs[0]; e.Regarding.UID != svc.UID || e.Regarding.Namespace != "default" || e.Type != corev1.EventTypeWarning || e.ReportingController != peers.ReportingController {
		t.Errorf("the Service's Event: %+v", e)
	}
	waitWrites(t, r, "event/ok=5 node_condition/ok=4", 0)
	stop()

	// An earlier matrix left cond-3 True: a new one clears it only once
	// it has not listed cond-3 for a minute, and a diagnosis naming
	// nothing writes nothing before that.
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":"True","reason":%q,"message":"left"}]}}`, peers.NodeConditionType, peers.ReasonHostLoss)
	if _, err := admin.CoreV1().Nodes().PatchStatus(ctx, "cond-3", []byte(patch)); err != nil {
		t.Fatal(err)
	}
	before := len(events(t, admin, "Node", ""))
	r, stop = start()
	defer stop()
	r.Observe(api.Diagnosis{Suspects: []api.Suspect{}})
	time.Sleep(time.Second)
	if got := condition(t, admin, "cond-3"); got == nil || got.Status != corev1.ConditionTrue {
		t.Errorf("cond-3 changed before the new matrix waited a minute: %+v", got)
	}
	if after := len(events(t, admin, "Node", "")); after != before {
		t.Errorf("a diagnosis naming nothing wrote %d Events", after-before)
	}
	clock.add(peers.ClearAfter + time.Second)
	r.Observe(api.Diagnosis{Suspects: []api.Suspect{}})
	waitCondition(t, admin, "cond-3", corev1.ConditionFalse, peers.ReasonNoProblem)
	waitEvents(t, admin, "Node", "cond-3", peers.ReasonNoProblem)
}

// rbac applies the chart's node conditions ClusterRole, rendered with
// matrix.nodeConditions.enabled, and binds it and the matrix's own
// ClusterRole to ServiceAccount sa: deploy/'s prober-matrix stays
// read-only for the other tests (TestKubeRBAC).
func rbac(t *testing.T, s *peerstest.Server, admin kubernetes.Interface, sa string) {
	t.Helper()
	out, _, err := charts.Render(peerstest.RepoFile(t, "charts/prober"), "prober", "prober",
		map[string]any{"matrix": map[string]any{"nodeConditions": map[string]any{"enabled": true}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ClusterRole", "Role"} {
		var role string
		for _, doc := range strings.Split(out, "\n---\n") {
			if strings.Contains(doc, "\nkind: "+kind+"\n") && strings.Contains(doc, "\n  name: prober-matrix-node-conditions\n") {
				role = doc
			}
		}
		if role == "" {
			t.Fatalf("the chart renders no %s prober-matrix-node-conditions with matrix.nodeConditions.enabled:\n%s", kind, out)
		}
		path := filepath.Join(t.TempDir(), "role.yaml")
		if err := os.WriteFile(path, []byte(role), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := s.Kubectl(t.Context(), "apply", "-f", path); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	// The Role (the Lease), bound in the agents' namespace as the chart does.
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa + "-lease", Namespace: "prober"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "prober-matrix-node-conditions"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: "prober"}}}
	if _, err := admin.RbacV1().RoleBindings("prober").Create(t.Context(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().RoleBindings("prober").Delete(context.Background(), rb.Name, metav1.DeleteOptions{})
	})
	for _, r := range []string{"prober-matrix", "prober-matrix-node-conditions"} {
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + r},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: "prober"}}}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(t.Context(), b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
		})
	}
}

// conditionsCluster is the real API server with deploy/ applied, its
// admin client, Nodes named nodes (deleted after the test), and a client
// of a ServiceAccount named after what that the chart's node-conditions
// RBAC binds, with the peers the reporter is told are those Nodes.
func conditionsCluster(t *testing.T, what string, nodes ...string) (*peerstest.Server, kubernetes.Interface, kubernetes.Interface, []peers.Peer) {
	t.Helper()
	s := apiServer(t)
	deployed(t, s)
	admin, err := s.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	sa := "prober-" + what + "-test"
	rbac(t, s, admin, sa)
	var ps []peers.Peer
	for _, n := range nodes {
		if _, err := admin.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
		ps = append(ps, peers.Peer{Name: n, Class: peers.ClassNode})
	}
	kc, err := s.Kubeconfig(what, "system:serviceaccount:prober:"+sa)
	if err != nil {
		t.Fatal(err)
	}
	client, err := peers.NewClient(kc, "prober-test/"+what)
	if err != nil {
		t.Fatal(err)
	}
	return s, admin, client, ps
}

// runReporter runs r until the returned stop, which waits for it.
func runReporter(t *testing.T, r *peers.Reporter) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	return func() { cancel(); <-done }
}

// condition is node's prober condition, nil when it carries none.
func condition(t *testing.T, admin kubernetes.Interface, node string) *corev1.NodeCondition {
	t.Helper()
	n, err := admin.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == peers.NodeConditionType {
			return &c
		}
	}
	return nil
}

func waitCondition(t *testing.T, admin kubernetes.Interface, node string, status corev1.ConditionStatus, reason string) {
	t.Helper()
	var c *corev1.NodeCondition
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c = condition(t, admin, node); c != nil && c.Status == status && c.Reason == reason {
			return
		}
	}
	t.Fatalf("%s: condition %+v, want %s %s within 15 s", node, c, status, reason)
}

// events lists the matrix's Events about kind/name (any name when
// empty), oldest first.
func events(t *testing.T, admin kubernetes.Interface, kind, name string) []eventsv1.Event {
	t.Helper()
	list, err := admin.EventsV1().Events("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.ReportingController == peers.ReportingController && e.Regarding.Kind == kind && (name == "" || e.Regarding.Name == name) {
			out = append(out, e)
		}
	}
	return out
}

// waitEvents waits for the matrix's Events about kind/name to carry
// reasons, in that order.
func waitEvents(t *testing.T, admin kubernetes.Interface, kind, name string, reasons ...string) []eventsv1.Event {
	t.Helper()
	var got []eventsv1.Event
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		got = events(t, admin, kind, name)
		var rs []string
		for _, e := range got {
			rs = append(rs, e.Reason)
		}
		if strings.Join(rs, ",") == strings.Join(reasons, ",") {
			return got
		}
	}
	t.Fatalf("Events about %s %s: %+v, want reasons %v within 15 s", kind, name, got, reasons)
	return nil
}

// waitWrites waits up to 5 s for r to count its writes as want
// ("object/result=n", sorted) with held changes held back: an Event is
// counted as its Create returns, just after the server has it.
func waitWrites(t *testing.T, r *peers.Reporter, want string, held int) {
	t.Helper()
	var got string
	var h int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var out []string
		h = r.Writes(func(object, result string, n uint64) {
			out = append(out, fmt.Sprintf("%s/%s=%d", object, result, n))
		})
		if got = strings.Join(out, " "); got == want && h == held {
			return
		}
	}
	t.Errorf("the reporter counts writes %q with %d held back, want %q with %d", got, h, want, held)
}
