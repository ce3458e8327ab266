package config

import "testing"

func TestKubernetesDefaults(t *testing.T) {
	t.Parallel()
	c, err := LoadAgent("testdata/good/kubernetes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	k := c.Kubernetes
	if !c.KubernetesDiscovery() || k.Namespace != DefaultNamespace || k.NodeAgentSelector != DefaultNodeAgentSelector ||
		k.PodAgentSelector != DefaultPodAgentSelector || k.AgentPort != DefaultPort || k.Kubeconfig != "" {
		t.Errorf("kubernetes defaults: %+v", k)
	}
	if got := k.APIServerLBAddr().String(); got != "203.0.113.10:6443" {
		t.Errorf("APIServerLBAddr = %s", got)
	}
	if c.Name != "" || c.Source != "" {
		t.Errorf("name %q source %q: want empty until the downward API fills them", c.Name, c.Source)
	}
	m, err := LoadAgent("testdata/good/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m.Discovery != DiscoveryStatic || m.Kubernetes != nil {
		t.Errorf("minimal: discovery %q kubernetes %+v, want static and none", m.Discovery, m.Kubernetes)
	}
}
