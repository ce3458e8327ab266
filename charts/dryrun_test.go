package charts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netprober/prober/peers/peerstest"
)

// operatorCRDs stand in for the Prometheus Operator's CRDs: the API
// server then checks the objects' group, version, kind and scope, but
// not their spec (the operator's own schemas are not in this repo).
const operatorCRDs = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: podmonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: PodMonitor, plural: podmonitors, singular: podmonitor, listKind: PodMonitorList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor, listKind: ServiceMonitorList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: prometheusrules.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: PrometheusRule, plural: prometheusrules, singular: prometheusrule, listKind: PrometheusRuleList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// TestValuesFilesApply renders every ci/*.yaml and applies it with
// `kubectl apply --dry-run=server` to a real kube-apiserver: its
// validation and admission, with no warning.
func TestValuesFilesApply(t *testing.T) {
	bins := peerstest.Binaries(t)
	s, err := peerstest.Start(bins, t.TempDir())
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	defer s.Stop()
	dir := t.TempDir()
	ns, _, err := render(t, deployValues)
	if err != nil {
		t.Fatal(err)
	}
	// A dry run cannot create the namespace its objects go in.
	ns = ns[:strings.Index(ns, "\n---\n")]
	for name, body := range map[string]string{"namespace.yaml": ns, "crds.yaml": operatorCRDs} {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := s.Kubectl(t.Context(), "apply", "-f", f); err != nil {
			t.Fatalf("apply %s: %v\n%s", name, err, out)
		}
	}
	if out, err := s.Kubectl(t.Context(), "wait", "--for=condition=Established", "--timeout=60s", "crd/podmonitors.monitoring.coreos.com",
		"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com"); err != nil {
		t.Fatalf("CRDs not established: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	for _, vf := range files {
		t.Run(filepath.Base(vf), func(t *testing.T) {
			m, _, err := render(t, valuesFile(t, vf))
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(dir, filepath.Base(vf))
			if err := os.WriteFile(f, []byte(m), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := s.Kubectl(t.Context(), "apply", "--dry-run=server", "-f", f)
			if err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if n := strings.Count(out, "(server dry run)"); n != strings.Count(m, "\nkind: ") {
				t.Errorf("%d objects applied, the render holds %d:\n%s", n, strings.Count(m, "\nkind: "), out)
			}
			// The namespace warns at the baseline Pod Security level on
			// purpose (the agents need NET_RAW, prober-node the host's
			// network); any other warning is a finding.
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(strings.ToLower(l), "warning") && !strings.Contains(l, `would violate PodSecurity "baseline:latest"`) {
					t.Errorf("dry run warned: %s", l)
				}
			}
		})
	}
}
