package peers_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
)

// TestKubeAgentAuth: agents prove their pod to the matrix with projected
// ServiceAccount tokens, issued here by the real API server as the
// kubelet would (TokenRequest, audience prober, bound to the pod), and the
// matrix verifies them locally with the keys peers.SigningKeys fetched:
// each agent gets its plan and its pull key with its own pod's token only,
// and no long-poll costs the API server a TokenReview (seed 003).
func TestKubeAgentAuth(t *testing.T) {
	s := apiServer(t)
	agents := loadCluster(t, s)
	m := startMatrix(t, s, "matrix-auth", config.AgentAuthToken)
	m.awaitPlan(t, agents, 2*time.Minute)
	admin, err := s.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	tok := func(sa, pod, audience string) string {
		t.Helper()
		return tokenFor(t, admin, sa, pod, audience)
	}
	const node, podAgent = "apiload-0007", "prober-pod-apiload-0007"
	own := tok(config.DefaultAgentServiceAccount, "prober-node-"+node, api.AgentTokenAudience)
	reviews := apiMetric(t, s, "apiserver_request_total", `resource="tokenreviews"`)
	keys := map[string]bool{}
	get := func(agent, token string) (status int, key string, body []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, m.URL+api.AgentPlanPath+agent+"?wait=1", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get(api.PullKeyHeader), body
	}
	for _, tc := range []struct {
		name, agent, token string
		status             int
	}{
		{"the node agent's own token", node, own, 200},
		{"the pod agent's own token", podAgent, tok(config.DefaultAgentServiceAccount, podAgent, api.AgentTokenAudience), 200},
		{"the node agent's token again (cached)", node, own, 200},
		{"no token", node, "", 401},
		{"the pod agent's token for the node agent", node, tok(config.DefaultAgentServiceAccount, podAgent, api.AgentTokenAudience), 403},
		{"a token for the API server's audience", node, tok(config.DefaultAgentServiceAccount, "prober-node-"+node, ""), 401},
		{"the matrix's token, bound to no pod", node, tok("prober-matrix", "", api.AgentTokenAudience), 401},
		{"a token with its signature cut", node, own[:strings.LastIndex(own, ".")+1] + "AAAA", 401},
	} {
		status, key, body := get(tc.agent, tc.token)
		if status != tc.status || (tc.status == 200) != (key != "") {
			t.Errorf("%s: %d (%.200s), pull key %q; want %d, and a key only with 200", tc.name, status, body, key, tc.status)
		}
		if key != "" {
			keys[tc.agent+" "+key] = true
		}
	}
	if len(keys) != 2 {
		t.Errorf("pull keys %v: want one per agent, the same on every answer", keys)
	}
	if n := apiMetric(t, s, "apiserver_request_total", `resource="tokenreviews"`) - reviews; n != 0 {
		t.Errorf("%v TokenReviews while the matrix checked tokens, want 0", n)
	}

	// The pod agent deleted and created again under its name, as a
	// StatefulSet or a hand would: the old pod's token, still unexpired,
	// must not serve the new pod; the new pod's does.
	old := tok(config.DefaultAgentServiceAccount, podAgent, api.AgentTokenAudience)
	pods := admin.CoreV1().Pods(config.DefaultNamespace)
	p, err := pods.Get(t.Context(), podAgent, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(t.Context(), podAgent, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if err := createAgentPod(t.Context(), admin, podAgent, "pod", p.Spec.NodeName, p.Status.PodIP); err != nil {
		t.Fatal(err)
	}
	renewed := tok(config.DefaultAgentServiceAccount, podAgent, api.AgentTokenAudience)
	var oldStatus, newStatus int
	var body []byte
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		oldStatus, _, body = get(podAgent, old)
		if newStatus, _, _ = get(podAgent, renewed); oldStatus == 403 && newStatus == 200 {
			break
		}
	}
	if oldStatus != 403 || newStatus != 200 || !strings.Contains(string(body), "UID") {
		t.Errorf("after %s was created again: its old pod's token %d (%.200s), the new pod's %d; want 403 naming the UID, and 200", podAgent, oldStatus, body, newStatus)
	}
}

// tokenFor asks the API server for a token of ServiceAccount sa in
// prober's namespace, bound to pod when set, for audience ("" for the API
// server's own).
func tokenFor(t *testing.T, c kubernetes.Interface, sa, pod, audience string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	exp := int64(600)
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	if pod != "" {
		p, err := c.CoreV1().Pods(config.DefaultNamespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		req.Spec.BoundObjectRef = &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod, UID: p.UID}
	}
	r, err := c.CoreV1().ServiceAccounts(config.DefaultNamespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s (pod %q): %v", sa, pod, err)
	}
	return r.Status.Token
}
