package charts

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	psa "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"
)

// TestPodSecurityLevels measures each workload's Pod Security level with
// the API server's own checks (k8s.io/pod-security-admission), on the
// default render: the matrix meets restricted; both agents need
// privileged, and the only thing baseline forbids them is what their
// probes are: the prober-pod agent's CAP_NET_RAW (raw ICMP and TCP-SYN
// sockets, not in baseline's capabilities), the node agent's too and its
// host network. docs/security.md says the same; the namespace's labels
// follow (enforce privileged, warn baseline).
func TestPodSecurityLevels(t *testing.T) {
	out, _, err := render(t, deployValues)
	if err != nil {
		t.Fatal(err)
	}
	eval, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		level    psa.Level
		baseline []string // what baseline forbids, each a check's reason
	}{
		"Deployment/prober-matrix": {level: psa.LevelRestricted},
		"DaemonSet/prober-pod":     {level: psa.LevelPrivileged, baseline: []string{"non-default capabilities"}},
		"DaemonSet/prober-node":    {level: psa.LevelPrivileged, baseline: []string{"host namespaces", "non-default capabilities"}},
	}
	seen := map[string]bool{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var w struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &w); err != nil {
			t.Fatal(err)
		}
		key := w.Kind + "/" + w.Metadata.Name
		wl, ok := want[key]
		if !ok {
			continue
		}
		seen[key] = true
		check := func(l psa.Level) policy.AggregateCheckResult {
			return policy.AggregateCheckResults(eval.EvaluatePod(psa.LevelVersion{Level: l, Version: psa.LatestVersion()}, &w.Spec.Template.ObjectMeta, &w.Spec.Template.Spec))
		}
		level := psa.LevelPrivileged
		base := check(psa.LevelBaseline)
		switch {
		case check(psa.LevelRestricted).Allowed:
			level = psa.LevelRestricted
		case base.Allowed:
			level = psa.LevelBaseline
		}
		t.Logf("%s: %s (baseline forbids: %s)", key, level, strings.Join(base.ForbiddenDetails, "; "))
		reasons := slices.Sorted(slices.Values(base.ForbiddenReasons))
		if level != wl.level || !slices.Equal(reasons, wl.baseline) {
			t.Errorf("%s: level %s, baseline forbids %q; want %s, forbidding %q only", key, level, reasons, wl.level, wl.baseline)
		}
	}
	for key := range want {
		if !seen[key] {
			t.Errorf("%s not rendered", key)
		}
	}
}
