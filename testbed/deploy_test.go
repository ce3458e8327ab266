package testbed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeployProbing reads the node agents' probing block from deploy/ and
// refuses files where there is none or it has unknown fields.
func TestDeployProbing(t *testing.T) {
	t.Parallel()
	p, err := DeployProbing(filepath.Join("..", "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Interval <= 0 || p.Window <= 0 || p.MaxProbesPerSecond <= 0 || p.Flows <= 0 || len(p.Protocols) == 0 {
		t.Errorf("deploy/'s probing block read as %+v", p)
	}

	dir := t.TempDir()
	cases := []struct{ name, yaml, wantErr string }{
		{"no ConfigMap", "kind: Namespace\nmetadata: {name: prober}\n", "no ConfigMap prober-agent"},
		{"no probing", "kind: ConfigMap\nmetadata: {name: prober-agent}\ndata:\n  node.yaml: |\n    class: node\n", "no probing block"},
		{"unknown field", "---\nkind: ConfigMap\nmetadata: {name: prober-agent}\ndata:\n  node.yaml: |\n    probing: {interval: 1s, intervall: 2s}\n", "intervall"},
	}
	for _, tc := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
		if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := DeployProbing(path); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err %v, want one naming %q", tc.name, err, tc.wantErr)
		}
	}
}
