package config

import (
	"os"
	"strings"
	"testing"
)

func TestKubernetesDefaults(t *testing.T) {
	t.Parallel()
	c, err := LoadAgent("testdata/good/kubernetes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	k := c.Kubernetes
	// An agent's block takes the agent's defaults only: the rest is the
	// matrix's.
	if !c.KubernetesDiscovery() || k.Namespace != DefaultNamespace || k.NodeAgentSelector != "" ||
		k.PodAgentSelector != "" || k.AgentPort != 0 || k.Kubeconfig != "" {
		t.Errorf("kubernetes defaults: %+v", k)
	}
	if got := k.MatrixURL(func(string) string { return "" }); got != "http://198.18.1.5:9809" {
		t.Errorf("MatrixURL = %s, want the configured one", got)
	}
	if c.Name != "" || c.Source != "" {
		t.Errorf("name %q source %q: want empty until the downward API fills them", c.Name, c.Source)
	}
	if k.APIServerCA() != "testdata/tls/cert.pem" || k.CheckAPIServerCA() != nil {
		t.Errorf("APIServerCA = %q (check: %v), want the configured testdata/tls/cert.pem", k.APIServerCA(), k.CheckAPIServerCA())
	}
	m, err := LoadAgent("testdata/good/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m.Discovery != DiscoveryStatic || m.Kubernetes != nil {
		t.Errorf("minimal: discovery %q kubernetes %+v, want static and none", m.Discovery, m.Kubernetes)
	}
}

// TestAPIServerCADefault: the ServiceAccount's CA is the default, left
// unread by Validate (it exists only in a pod: --check runs anywhere and
// the deployed configs must pass it), and read at start, where a missing
// one is named with the way out.
func TestAPIServerCADefault(t *testing.T) {
	t.Parallel()
	c, err := ParseAgent("node.yaml", []byte("class: node\nlisten: 0.0.0.0:9808\ndiscovery: kubernetes\nprobing: {protocols: [tcp_syn, http2_ping]}\n"))
	if err != nil {
		t.Fatalf("a config leaving the CA to its default: %v", err)
	}
	k := c.Kubernetes
	if k.APIServerCA() != DefaultAPIServerCAFile || k.APIServerCAFile != "" {
		t.Errorf("APIServerCA %q, field %q; want the default, the field unset", k.APIServerCA(), k.APIServerCAFile)
	}
	if _, err := os.Stat(DefaultAPIServerCAFile); err == nil {
		t.Skip("running in a pod: the ServiceAccount CA exists")
	}
	err = k.CheckAPIServerCA()
	if err == nil || !strings.Contains(err.Error(), "kubernetes.apiServerCAFile") || !strings.Contains(err.Error(), "elsewhere set kubernetes.apiServerCAFile") {
		t.Errorf("CheckAPIServerCA without the ServiceAccount CA: %v", err)
	}
}

// TestMatrixURL: the configured URL, else the matrix Service's address
// from the pod's environment, else its DNS name.
func TestMatrixURL(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PROBER_MATRIX_SERVICE_HOST": "198.51.100.9", "PROBER_MATRIX_SERVICE_PORT": "9809"}
	k := &Kubernetes{Namespace: "mon"}
	if got := k.MatrixURL(func(k string) string { return env[k] }); got != "http://198.51.100.9:9809" {
		t.Errorf("from the environment: %s", got)
	}
	if got := k.MatrixURL(func(string) string { return "" }); got != "http://prober-matrix.mon.svc:9809" {
		t.Errorf("without the environment: %s", got)
	}
	// With the matrix's CA: https, verified for the Service's name
	// whatever address is dialled.
	k.MatrixCAFile = "testdata/tls/cert.pem"
	if got := k.MatrixURL(func(k string) string { return env[k] }); got != "https://198.51.100.9:9809" || k.MatrixServerName() != "prober-matrix.mon.svc" {
		t.Errorf("with matrixCAFile: %s for %s", got, k.MatrixServerName())
	}
	k.Matrix = "https://m.example:1/"
	if got := k.MatrixURL(func(k string) string { return env[k] }); got != "https://m.example:1" || k.MatrixServerName() != "m.example" {
		t.Errorf("configured: %s for %s", got, k.MatrixServerName())
	}
}

// TestMatrixCAFile: read at --check, and refused beside a plain-http
// matrix URL, where it would verify nothing.
func TestMatrixCAFile(t *testing.T) {
	t.Parallel()
	const base = "class: pod\nlisten: 0.0.0.0:9808\ndiscovery: kubernetes\n"
	if _, err := ParseAgent("a.yaml", []byte(base+"kubernetes: {matrixCAFile: testdata/tls/cert.pem, matrix: \"https://m.example:1\"}\n")); err != nil {
		t.Errorf("https with a CA: %v", err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"kubernetes: {matrixCAFile: testdata/tls/none.pem}", "kubernetes.matrixCAFile: open testdata/tls/none.pem"},
		{"kubernetes: {matrixCAFile: testdata/tls/key.pem}", "kubernetes.matrixCAFile: testdata/tls/key.pem: no PEM certificate"},
		{"kubernetes: {matrixCAFile: testdata/tls/cert.pem, matrix: \"http://m.example:1\"}", "is plain http"},
	} {
		if _, err := ParseAgent("a.yaml", []byte(base+tc.yaml+"\n")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// TestAgentAuthSettings: the token file is the agent's, agentAuth and the
// agents' ServiceAccount the matrix's, each defaulted on its own side and
// refused with its field named on the other.
func TestAgentAuthSettings(t *testing.T) {
	t.Parallel()
	a, err := ParseAgent("a.yaml", []byte("class: pod\nlisten: 0.0.0.0:9808\ndiscovery: kubernetes\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Kubernetes.TokenFile != DefaultTokenFile || a.Kubernetes.AgentAuth != "" {
		t.Errorf("agent: %+v", a.Kubernetes)
	}
	m, err := ParseMatrix("m.yaml", []byte("listen: 198.18.1.11:9809\ndiscovery: kubernetes\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Kubernetes.AgentAuth != AgentAuthToken || m.Kubernetes.AgentServiceAccount != DefaultAgentServiceAccount || m.Kubernetes.TokenFile != "" {
		t.Errorf("matrix: %+v", m.Kubernetes)
	}
	for _, tc := range []struct{ name, agent, matrix, want string }{
		{"agentAuth on an agent", "kubernetes: {agentAuth: none}", "", "kubernetes.agentAuth: the matrix's setting"},
		{"agentServiceAccount on an agent", "kubernetes: {agentServiceAccount: x}", "", "kubernetes.agentServiceAccount: the matrix's setting"},
		{"tokenFile on the matrix", "", "kubernetes: {tokenFile: /t}", "tokenFile are agents' settings"},
		{"an unknown agentAuth", "", "kubernetes: {agentAuth: tls}", `kubernetes.agentAuth: "tls" not one of token, none`},
		{"a bad ServiceAccount", "", "kubernetes: {agentServiceAccount: Prober_Agent}", "kubernetes.agentServiceAccount"},
	} {
		var err error
		if tc.agent != "" {
			_, err = ParseAgent("a.yaml", []byte("class: pod\nlisten: 0.0.0.0:9808\ndiscovery: kubernetes\n"+tc.agent+"\n"))
		} else {
			_, err = ParseMatrix("m.yaml", []byte("listen: 198.18.1.11:9809\ndiscovery: kubernetes\n"+tc.matrix+"\n"))
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestPullKeySecretFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	short, good := dir+"/short", dir+"/good"
	os.WriteFile(short, []byte("too short\n"), 0o600)
	os.WriteFile(good, []byte(strings.Repeat("k", 40)+"\n"), 0o600)
	m, err := ParseMatrix("m.yaml", []byte("listen: 198.18.1.11:9809\ndiscovery: kubernetes\nkubernetes: {pullKeySecretFile: "+good+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := m.Kubernetes.PullKeySecret(); err != nil || len(b) != 40 {
		t.Errorf("secret %q %v: want 40 bytes, the newline dropped", b, err)
	}
	for _, f := range []string{short, dir + "/missing"} {
		_, err := ParseMatrix("m.yaml", []byte("listen: 198.18.1.11:9809\ndiscovery: kubernetes\nkubernetes: {pullKeySecretFile: "+f+"}\n"))
		if err == nil || !strings.Contains(err.Error(), "kubernetes.pullKeySecretFile") {
			t.Errorf("%s: %v, want refused with the field", f, err)
		}
	}
}

// TestNodeConditionsSettings: off unless enabled, a default bound on the
// writes, bounds refused with their field, and the matrix's alone.
func TestNodeConditionsSettings(t *testing.T) {
	t.Parallel()
	const head = "listen: 198.18.1.11:9809\ndiscovery: kubernetes\n"
	m, err := ParseMatrix("m.yaml", []byte(head))
	if err != nil {
		t.Fatal(err)
	}
	if m.Kubernetes.WritesNodeConditions() {
		t.Error("writes Node conditions with no nodeConditions block")
	}
	m, err = ParseMatrix("m.yaml", []byte(head+"kubernetes: {nodeConditions: {enabled: true}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Kubernetes.WritesNodeConditions() || m.Kubernetes.NodeConditions.WritesPerMinute != DefaultWritesPerMinute {
		t.Errorf("enabled: %+v", m.Kubernetes.NodeConditions)
	}
	m, err = ParseMatrix("m.yaml", []byte(head+"kubernetes: {nodeConditions: {enabled: false, writesPerMinute: 3}}\n"))
	if err != nil || m.Kubernetes.WritesNodeConditions() {
		t.Errorf("enabled: false: %v, writes %v", err, m != nil && m.Kubernetes.WritesNodeConditions())
	}
	for _, tc := range []struct{ name, cfg, want string }{
		{"no writes", head + "kubernetes: {nodeConditions: {enabled: true, writesPerMinute: -1}}", "kubernetes.nodeConditions.writesPerMinute: -1 not in 1..120"},
		{"too many", head + "kubernetes: {nodeConditions: {enabled: true, writesPerMinute: 1000}}", "kubernetes.nodeConditions.writesPerMinute: 1000 not in 1..120"},
		{"a typo", head + "kubernetes: {nodeConditions: {enable: true}}", "enable"},
	} {
		if _, err := ParseMatrix("m.yaml", []byte(tc.cfg+"\n")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	_, err = ParseAgent("a.yaml", []byte("class: pod\nlisten: 0.0.0.0:9808\ndiscovery: kubernetes\nkubernetes: {nodeConditions: {enabled: true}}\n"))
	if err == nil || !strings.Contains(err.Error(), "kubernetes.nodeConditions: the matrix's setting") {
		t.Errorf("on an agent: %v", err)
	}
}
