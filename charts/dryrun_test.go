package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netprober/prober/peers/peerstest"
)

// operatorCRD stands in for one of the Prometheus Operator's CRDs: the
// API server then checks the objects' group, version, kind and scope, but
// not their spec (the operator's own schemas are not in this repo).
func operatorCRD(kind string) string {
	lower := strings.ToLower(kind)
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]ss.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: %[1]s, plural: %[2]ss, singular: %[2]s, listKind: %[1]sList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, kind, lower)
}

var operatorKinds = []string{"PodMonitor", "ServiceMonitor", "PrometheusRule"}

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
	// A dry run cannot create the namespace its objects go in: the
	// render's first object, in Helm's install order.
	ns, _, _ = strings.Cut(ns, "\n---\n")
	if !strings.Contains(ns, "\nkind: Namespace\n") {
		t.Fatalf("the render does not open with the Namespace:\n%s", ns)
	}
	var crds []string
	for _, k := range operatorKinds {
		crds = append(crds, operatorCRD(k))
	}
	for name, body := range map[string]string{"namespace.yaml": ns, "crds.yaml": strings.Join(crds, "---\n")} {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := s.Kubectl(t.Context(), "apply", "-f", f); err != nil {
			t.Fatalf("apply %s: %v\n%s", name, err, out)
		}
	}
	wait := []string{"wait", "--for=condition=Established", "--timeout=60s"}
	for _, k := range operatorKinds {
		wait = append(wait, "crd/"+strings.ToLower(k)+"s.monitoring.coreos.com")
	}
	if out, err := s.Kubectl(t.Context(), wait...); err != nil {
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
