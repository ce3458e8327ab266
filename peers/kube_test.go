package peers_test

// Integration tests against a real kube-apiserver and etcd on 127.0.0.1
// (package peerstest). Node and pod addresses are from 198.18.0.0/15 and
// RFC 5737: discovery only reads them, nothing is dialled.

import (
	"flag"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netprober/prober/peers/peerstest"
)

var (
	kubeOnce   sync.Once
	kubeServer *peerstest.Server
	kubeErr    error
	kubeDir    string
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if kubeServer != nil {
		kubeServer.Stop()
	}
	if kubeDir != "" {
		os.RemoveAll(kubeDir)
	}
	os.Exit(code)
}

// apiServer is the package's shared API server, started on first use: a
// start costs seconds of CPU, so the tests share one and use distinct
// objects.
func apiServer(t *testing.T) *peerstest.Server {
	t.Helper()
	bins := peerstest.Binaries(t)
	kubeOnce.Do(func() {
		if kubeDir, kubeErr = os.MkdirTemp("", "peerstest-"); kubeErr != nil {
			return
		}
		kubeServer, kubeErr = peerstest.Start(bins, kubeDir)
	})
	if kubeErr != nil {
		t.Fatalf("start kube-apiserver: %v", kubeErr)
	}
	return kubeServer
}

var deployOnce sync.Once

// deployed applies deploy/daemonset.yaml once for real: the Namespace,
// ServiceAccounts and RBAC the other tests run under. A bare API server
// runs no controllers, so no pod starts.
func deployed(t *testing.T, s *peerstest.Server) {
	t.Helper()
	var out string
	var err error
	deployOnce.Do(func() {
		out, err = s.Kubectl(t.Context(), "apply", "-f", peerstest.RepoFile(t, "deploy/daemonset.yaml"))
	})
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
}

// TestKubeDeployDryRun runs what the README tells a user, `kubectl apply
// -f deploy/`, as a server-side dry run: the API server's own validation
// and admission. A dry run cannot create a namespace for the objects in
// it, so the Namespace is applied for real first. Files that need the
// Prometheus Operator's CRDs live in deploy/optional/, which a plain -f
// deploy/ does not descend into.
func TestKubeDeployDryRun(t *testing.T) {
	s := apiServer(t)
	deployed(t, s)
	out, err := s.Kubectl(t.Context(), "apply", "--dry-run=server", "-f", peerstest.RepoFile(t, "deploy")+"/")
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for _, want := range []string{"daemonset.apps/prober-node", "daemonset.apps/prober-pod", "deployment.apps/prober-matrix",
		"clusterrole.rbac.authorization.k8s.io/prober-matrix", "role.rbac.authorization.k8s.io/prober-matrix", "service/prober-matrix"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run did not apply %s:\n%s", want, out)
		}
	}
	if strings.Contains(strings.ToLower(out), "warning") {
		t.Errorf("dry run warned:\n%s", out)
	}
	// The optional NetworkPolicies need no CRD: the API server checks
	// them too.
	out, err = s.Kubectl(t.Context(), "apply", "--dry-run=server", "-f", peerstest.RepoFile(t, "deploy/optional/networkpolicy.yaml"))
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for _, want := range []string{"networkpolicy.networking.k8s.io/prober-pod-agents", "networkpolicy.networking.k8s.io/prober-matrix"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run did not apply %s:\n%s", want, out)
		}
	}
}

// TestKubeRBAC asks the API server what each ServiceAccount may do: the
// matrix get, list and watch on nodes, services and endpointslices, and
// on pods in prober's namespace only; the agents nothing at all (they
// hold no token and get their plan from the matrix); no secrets, no
// writes. kubectl auth can-i --list gives the whole
// picture; SubjectAccessReviews (what can-i sends) check each verb and
// resource in two namespaces, quicker than a kubectl run each.
func TestKubeRBAC(t *testing.T) {
	s := apiServer(t)
	deployed(t, s)
	admin, err := s.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	type res struct{ group, resource, sub string }
	readable := []res{{"", "nodes", ""}, {"", "pods", ""}, {"", "services", ""}, {"discovery.k8s.io", "endpointslices", ""}}
	others := []res{{"", "secrets", ""}, {"", "configmaps", ""}, {"", "serviceaccounts", ""}, {"apps", "daemonsets", ""},
		{"coordination.k8s.io", "leases", ""}, {"rbac.authorization.k8s.io", "clusterroles", ""}, {"", "events", ""},
		{"", "pods", "exec"}, {"", "pods", "status"}, {"", "nodes", "proxy"}, {"", "nodes", "status"}, {"", "serviceaccounts", "token"}}
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "impersonate", "escalate", "bind"}
	for _, sa := range []string{"prober-agent", "prober-matrix"} {
		user := "system:serviceaccount:prober:" + sa
		for _, r := range append(readable, others...) {
			for _, v := range verbs {
				for _, ns := range []string{"prober", "kube-system", ""} {
					want := sa == "prober-matrix" && r.sub == "" && (v == "get" || v == "list" || v == "watch") && slices.Contains(readable, r) &&
						(r.resource != "pods" || ns == "prober")
					review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
						User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:prober", "system:authenticated"},
						ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: v, Group: r.group, Resource: r.resource, Subresource: r.sub},
					}}
					got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if got.Status.Allowed != want {
						t.Errorf("%s may %s %s/%s in %q: %v, want %v", sa, v, r.resource, r.sub, ns, got.Status.Allowed, want)
					}
				}
			}
		}
		matrixOnly := map[bool]string{true: "yes", false: "no"}[sa == "prober-matrix"]
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"list", "secrets", "-A"}, "no"},
			{[]string{"get", "secrets", "-n", "prober"}, "no"},
			{[]string{"create", "pods", "-n", "prober"}, "no"},
			{[]string{"patch", "nodes"}, "no"},
			{[]string{"list", "pods", "-A"}, "no"},
			{[]string{"watch", "nodes"}, matrixOnly},
			{[]string{"list", "pods", "-n", "prober"}, matrixOnly},
			{[]string{"list", "endpointslices.discovery.k8s.io", "-A"}, matrixOnly},
		} {
			out, _ := s.Kubectl(ctx, append([]string{"auth", "can-i", "--as", user}, c.args...)...)
			lines := strings.Split(strings.TrimSpace(out), "\n") // a warning may come first
			if got := lines[len(lines)-1]; got != c.want {
				t.Errorf("kubectl auth can-i %s as %s: %q, want %s", strings.Join(c.args, " "), sa, out, c.want)
			}
		}
		// Whatever else the list shows is Kubernetes' default for every
		// authenticated user: self-reviews and non-resource URLs.
		out, err := s.Kubectl(ctx, "auth", "can-i", "--list", "--as", user, "-n", "prober")
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		seen := 0
		for _, line := range strings.Split(out, "\n")[1:] {
			f := strings.Fields(line)
			if len(f) == 0 || strings.HasPrefix(f[0], "[") || strings.HasPrefix(f[0], "self") {
				continue
			}
			verbs := line[strings.LastIndex(line, "["):]
			switch f[0] {
			case "nodes", "pods", "services", "endpointslices.discovery.k8s.io":
				seen++
				if verbs != "[get list watch]" {
					t.Errorf("%s: %s: verbs %s", sa, f[0], verbs)
				}
			default:
				t.Errorf("%s may also: %s", sa, line)
			}
		}
		if want := map[string]int{"prober-matrix": 4, "prober-agent": 0}[sa]; seen != want {
			t.Errorf("%s: can-i --list in prober shows %d readable resources, want %d:\n%s", sa, seen, want, out)
		}
	}
}
