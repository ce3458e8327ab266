package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/netprober/prober/config"
	"github.com/netprober/prober/probe"
)

// TestDeployConfigs checks the agent and matrix configurations embedded in
// deploy/daemonset.yaml's ConfigMaps as `--check` would: a config that
// drifts from the code fails here, not in a cluster.
func TestDeployConfigs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile(`\n  ([a-z-]+\.yaml): \|\n((?:    .*\n|\n)+)`).FindAllStringSubmatch(string(b), -1)
	seen := map[string]bool{}
	for _, m := range blocks {
		name, body := m[1], unindent(m[2], 4)
		seen[name] = true
		var err error
		if name == "matrix.yaml" {
			var c *config.Matrix
			if c, err = config.ParseMatrix(name, []byte(body)); err == nil && !c.KubernetesDiscovery() {
				t.Errorf("%s: the deployed matrix should find agents by discovery", name)
			}
		} else {
			var c *config.Agent
			if c, err = config.ParseAgent(name, []byte(body)); err == nil && !c.KubernetesDiscovery() {
				t.Errorf("%s: the deployed agents should find peers by discovery", name)
			}
			// Seed 001 is why prober exists: only http2_ping rides an
			// established flow.
			if err == nil && !slices.Contains(c.Probing.Protocols, probe.ProtocolHTTP2Ping) {
				t.Errorf("%s: protocols %v, want http2_ping on", name, c.Probing.Protocols)
			}
		}
		if err != nil {
			t.Errorf("deploy/daemonset.yaml: %v", err)
		}
	}
	if !seen["matrix.yaml"] || len(seen) < 2 {
		t.Errorf("found configs %v; want the matrix's and the agents'", seen)
	}
}

func unindent(s string, n int) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if len(l) >= n {
			lines[i] = l[n:]
		}
	}
	return strings.Join(lines, "\n")
}

// TestDeployPrivileges: agents carry no API token and are bound to no
// role; only the matrix reads the API, pods only in its namespace; the
// matrix's Service precedes the DaemonSets, so agents find it in their
// environment.
func TestDeployPrivileges(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	daemonSets := 0
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var obj struct {
			Kind     string                `json:"kind"`
			Metadata struct{ Name string } `json:"metadata"`
			Rules    []struct {
				Resources []string `json:"resources"`
			} `json:"rules"`
			Subjects []struct{ Name string } `json:"subjects"`
			Spec     struct {
				Template struct {
					Spec struct {
						ServiceAccountName           string `json:"serviceAccountName"`
						AutomountServiceAccountToken *bool  `json:"automountServiceAccountToken"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind == "" {
			continue
		}
		kinds = append(kinds, obj.Kind+"/"+obj.Metadata.Name)
		for _, s := range obj.Subjects {
			if s.Name != "prober-matrix" {
				t.Errorf("%s %s binds %s: only the matrix reads the API", obj.Kind, obj.Metadata.Name, s.Name)
			}
		}
		for _, r := range obj.Rules {
			if obj.Kind == "ClusterRole" && slices.Contains(r.Resources, "pods") {
				t.Errorf("ClusterRole %s reads pods cluster-wide; a Role in prober's namespace suffices", obj.Metadata.Name)
			}
		}
		if obj.Kind == "DaemonSet" {
			daemonSets++
			ps := obj.Spec.Template.Spec
			if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
				t.Errorf("DaemonSet %s mounts an API token", obj.Metadata.Name)
			}
			if !slices.Contains(kinds, "Service/prober-matrix") {
				t.Errorf("DaemonSet %s comes before the prober-matrix Service", obj.Metadata.Name)
			}
		}
	}
	if daemonSets != 2 {
		t.Errorf("%d DaemonSets in %v, want 2", daemonSets, kinds)
	}
}
