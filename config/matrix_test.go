package config

import (
	"strings"
	"testing"
	"time"
)

func TestMatrixGood(t *testing.T) {
	t.Parallel()
	c, err := LoadMatrix("testdata/matrix/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.GroupBy != "rack" || c.Interval.D() != 5*time.Second || c.Timeout.D() != 2*time.Second || c.Concurrency != 32 || len(c.Hops) != 3 {
		t.Errorf("loaded %+v", c)
	}
}

func TestMatrixKubernetes(t *testing.T) {
	t.Parallel()
	c, err := ParseMatrix("m.yaml", []byte("listen: 0.0.0.0:9809\ndiscovery: kubernetes\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.KubernetesDiscovery() || c.Kubernetes.Namespace != DefaultNamespace || c.Kubernetes.AgentPort != DefaultPort {
		t.Errorf("kubernetes defaults: %+v", c.Kubernetes)
	}
	if c.Plan.MaxTargets != 256 || c.Plan.InGroup != 8 || c.Plan.Rotation.D() != 10*time.Minute {
		t.Errorf("plan defaults: %+v", c.Plan)
	}
}

func TestMatrixBad(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ yaml, want string }{
		"no agents":     {"listen: 198.18.1.11:9809\n", "agents: required"},
		"agent path":    {"listen: 198.18.1.11:9809\nagents: [http://198.18.1.11:9808/metrics]\n", "agents[0]"},
		"agent scheme":  {"listen: 198.18.1.11:9809\nagents: [ftp://198.18.1.11]\n", "agents[0]"},
		"duplicate":     {"listen: 198.18.1.11:9809\nagents: [http://a:1, http://a:1]\n", "agents[1]"},
		"bad hop":       {"listen: 198.18.1.11:9809\nagents: [http://a:1]\nhops: {spine1: 198.19.1.1}\n", "hops.spine1"},
		"unknown field": {"listen: 198.18.1.11:9809\nagents: [http://a:1]\ngroupby: rack\n", "groupby: unknown field"},
		"timeout":       {"listen: 198.18.1.11:9809\nagents: [http://a:1]\ninterval: 1s\ntimeout: 2s\n", "timeout"},
		"window":        {"listen: 198.18.1.11:9809\nagents: [http://a:1]\ninterval: 10s\nwindow: 5s\n", "window"},
		"listen":        {"listen: nowhere\nagents: [http://a:1]\n", "listen"},
		"kube + agents": {"listen: 198.18.1.11:9809\ndiscovery: kubernetes\nagents: [http://a:1]\n", "agents: must be empty"},
		"kube block":    {"listen: 198.18.1.11:9809\nagents: [http://a:1]\nkubernetes: {namespace: x}\n", "kubernetes: set, but discovery is static"},
		"kube ns":       {"listen: 198.18.1.11:9809\ndiscovery: kubernetes\nkubernetes: {namespace: Not_A_Name}\n", "kubernetes.namespace"},
		"discovery":     {"listen: 198.18.1.11:9809\ndiscovery: consul\n", "discovery"},
		"agent's field": {"listen: 198.18.1.11:9809\ndiscovery: kubernetes\nkubernetes: {matrix: http://a:1}\n", "kubernetes: matrix, matrixCAFile, apiServerCAFile and tokenFile are agents' settings"},
		"agent's CA":    {"listen: 198.18.1.11:9809\ndiscovery: kubernetes\nkubernetes: {matrixCAFile: testdata/tls/cert.pem}\n", "kubernetes: matrix, matrixCAFile"},
		"tls half":      {"listen: 198.18.1.11:9809\nagents: [http://a:1]\ntls: {certFile: testdata/tls/cert.pem}\n", "tls.keyFile: required"},
		"tls missing":   {"listen: 198.18.1.11:9809\nagents: [http://a:1]\ntls: {certFile: testdata/tls/none.pem, keyFile: testdata/tls/key.pem}\n", "tls.certFile: testdata/tls/none.pem"},
		"tls self":      {"listen: 198.18.1.11:9809\nagents: [http://a:1]\ntls: {selfSigned: true}\n", "tls: certFile and keyFile only"},
		"plan":          {"listen: 198.18.1.11:9809\nagents: [http://a:1]\nplan: {maxTargets: -1}\n", "plan.maxTargets"},
		"plan ingroup":  {"listen: 198.18.1.11:9809\nagents: [http://a:1]\nplan: {inGroup: 2}\n", "plan.inGroup"},
		"plan rotation": {"listen: 198.18.1.11:9809\nagents: [http://a:1]\nplan: {rotation: 5s}\n", "plan.rotation"},
		"host url":      {"listen: 198.18.1.11:9809\nagents: [http://a:1]\nhosts: [ok.example.com, \"http://m.example.com:9809\"]\n", "hosts[1]"},
		"host label":    {"listen: 198.18.1.11:9809\nagents: [http://a:1]\nhosts: [\"-bad.example.com\"]\n", "hosts[0]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseMatrix("m.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), "m.yaml: "+tc.want) {
				t.Errorf("got %v, want a message with %q", err, tc.want)
			}
		})
	}
}
