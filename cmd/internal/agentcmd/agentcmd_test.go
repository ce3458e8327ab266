package agentcmd

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/netprober/prober/config"
)

func TestPlanSourceIdentity(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NODE_NAME": "n1", "POD_NAME": "prober-pod-x", "POD_IP": "198.51.100.4",
		"PROBER_MATRIX_SERVICE_HOST": "198.51.100.9", "PROBER_MATRIX_SERVICE_PORT": "9809"}
	cfg, err := config.ParseAgent("pod.yaml", []byte("class: pod\nlisten: 0.0.0.0:9808\ndiscovery: kubernetes\n"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := planSource(cfg, func(k string) string { return env[k] }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "prober-pod-x" || cfg.Source != "198.51.100.4" || cfg.Labels["node"] != "n1" {
		t.Errorf("identity: name %q source %q labels %v", cfg.Name, cfg.Source, cfg.Labels)
	}
	if src.URL != "http://198.51.100.9:9809" || src.Labels["node"] != "n1" {
		t.Errorf("plan source %+v: want the matrix Service from the environment, the node label", src)
	}
	if _, err := planSource(cfg, func(string) string { return "" }, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("missing downward API env accepted")
	}
}

// TestPlanSourceAPIServerCA: a node agent that pings the API server
// checks its CA at start, the kube-root-ca.crt mount by default; a pod
// agent, which does not ping it, does not.
func TestPlanSourceAPIServerCA(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NODE_NAME": "n1", "POD_NAME": "prober-node-x", "POD_IP": "192.0.2.4"}
	getenv := func(k string) string { return env[k] }
	parse := func(yaml string) *config.Agent {
		t.Helper()
		cfg, err := config.ParseAgent("agent.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const base = "listen: 0.0.0.0:9808\ndiscovery: kubernetes\nprobing: {protocols: [tcp_syn, http2_ping]}\n"
	if _, err := os.Stat(config.DefaultAPIServerCAFile); err != nil {
		_, err := planSource(parse("class: node\n"+base), getenv, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), "kubernetes.apiServerCAFile") {
			t.Errorf("node agent without the API server CA: %v, want kubernetes.apiServerCAFile named", err)
		}
	}
	for _, yaml := range []string{
		"class: node\n" + base + "kubernetes: {apiServerCAFile: ../../../config/testdata/tls/cert.pem}\n",
		"class: pod\n" + base,
	} {
		src, err := planSource(parse(yaml), getenv, slog.New(slog.DiscardHandler))
		if err != nil || src.URL != "http://prober-matrix.prober.svc:9809" {
			t.Errorf("%s: %+v, %v; want the matrix's DNS name", yaml, src, err)
		}
	}
}

// TestPlanSourceTLS: with kubernetes.matrixCAFile the agent follows the
// Service's address over https, verifying the Service's name.
func TestPlanSourceTLS(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NODE_NAME": "n1", "POD_NAME": "prober-pod-x", "POD_IP": "198.51.100.4",
		"PROBER_MATRIX_SERVICE_HOST": "198.51.100.9", "PROBER_MATRIX_SERVICE_PORT": "9809"}
	cfg, err := config.ParseAgent("pod.yaml", []byte("class: pod\nlisten: 0.0.0.0:9808\ndiscovery: kubernetes\nkubernetes: {namespace: mon, matrixCAFile: ../../../config/testdata/tls/cert.pem}\n"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := planSource(cfg, func(k string) string { return env[k] }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if src.URL != "https://198.51.100.9:9809" || src.TLS == nil || src.TLS.ServerName != "prober-matrix.mon.svc" {
		t.Errorf("plan source %s, TLS %v: want https to the Service's address, verified as prober-matrix.mon.svc", src.URL, src.TLS)
	}
}

// TestAgentGCPercent: the agent sets its own GOGC, and GOGC in the
// environment (a pod's env) wins over it.
func TestAgentGCPercent(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if pct, ok := gcPercent(getenv); !ok || pct <= 0 || pct >= 100 {
		t.Errorf("no GOGC set: got %d, %v; want the agent's own, below the default 100", pct, ok)
	}
	env["GOGC"] = "200"
	if pct, ok := gcPercent(getenv); ok {
		t.Errorf("GOGC=200 set: the agent would override it with %d", pct)
	}
}
