package dashboards

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/netprober/prober/dashboards/dashtest"
)

func loadDashboards(t *testing.T) map[string]dashtest.Dashboard {
	t.Helper()
	ds, err := dashtest.LoadDashboards(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// builtins are Grafana's own variables the dashboards may use.
var builtins = map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}

// TestDashboardModel checks what Grafana needs to import a dashboard and
// run its queries: unique uids and ids, the datasource variable used by
// every query, defined variables, panels inside the 24-column grid, and a
// description on every panel that queries.
func TestDashboardModel(t *testing.T) {
	t.Parallel()
	uids := map[string]string{}
	for name, d := range loadDashboards(t) {
		if d.UID == "" || d.Title == "" || d.ID != nil || d.SchemaVersion < 36 {
			t.Errorf("%s: uid %q title %q id %v schemaVersion %d: want a uid, a title, id null and schemaVersion >= 36 (Grafana 10)", name, d.UID, d.Title, d.ID, d.SchemaVersion)
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s: uid %q also used by %s", name, d.UID, other)
		}
		uids[d.UID] = name
		vars := map[string]bool{}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
			switch {
			case v.Name == "datasource":
				if v.Type != "datasource" || v.QueryText() != "prometheus" {
					t.Errorf("%s: variable datasource: type %q query %q, want a prometheus datasource variable", name, v.Type, v.QueryText())
				}
			case v.Type == "query":
				if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
					t.Errorf("%s: variable %s does not query ${datasource}", name, v.Name)
				}
				if !strings.HasPrefix(v.QueryText(), "label_values(") {
					t.Errorf("%s: variable %s: query %q, want label_values(metric, label)", name, v.Name, v.QueryText())
				}
				if v.IncludeAll && v.AllValue != ".*" {
					t.Errorf("%s: variable %s: allValue %q, want .* (the panels match with =~)", name, v.Name, v.AllValue)
				}
			}
		}
		if !vars["datasource"] {
			t.Errorf("%s: no datasource variable", name)
		}
		ids := map[int]bool{}
		for _, p := range dashtest.AllPanels(d.Panels) {
			where := fmt.Sprintf("%s: panel %d %q", name, p.ID, p.Title)
			if ids[p.ID] || p.ID == 0 {
				t.Errorf("%s: id missing or not unique", where)
			}
			ids[p.ID] = true
			if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s: gridPos %+v outside the 24-column grid", where, g)
			}
			if len(p.Targets) == 0 {
				if p.Type != "row" && p.Type != "text" {
					t.Errorf("%s: a %s panel without queries", where, p.Type)
				}
				continue
			}
			if p.Description == "" {
				t.Errorf("%s: no description (what the panel answers)", where)
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: datasource %+v, want uid ${datasource}", where, p.Datasource)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
					t.Errorf("%s: target %s datasource %+v, want uid ${datasource}", where, tg.RefID, tg.Datasource)
				}
				if tg.RefID == "" || refs[tg.RefID] || strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s: target %q: refId missing or repeated, or empty expr", where, tg.RefID)
				}
				refs[tg.RefID] = true
				for _, v := range dashtest.VarRefs(tg.Expr) {
					if !vars[v] && !builtins[v] {
						t.Errorf("%s: target %s uses $%s, which is not defined", where, tg.RefID, v)
					}
				}
			}
		}
	}
}

// tool returns the path of an installed tool, skipping the test without
// it unless PROBER_REQUIRE_TOOLS is set (make test sets it after
// installing them, so a broken install fails instead of skipping).
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("PROBER_REQUIRE_TOOLS") != "" {
		t.Fatalf("%s not found and PROBER_REQUIRE_TOOLS is set: hack/deps.sh installs it (Debian package prometheus)", name)
	}
	t.Skipf("%s not installed (Debian package prometheus; make test installs it)", name)
	return ""
}

// TestRulesPromtool runs `promtool check rules` on the plain rules file
// and `promtool test rules` on testdata/rules_test.yaml, whose cases must
// cover every alert both firing and not firing.
func TestRulesPromtool(t *testing.T) {
	t.Parallel()
	promtool := tool(t, "promtool")
	if out, err := exec.Command(promtool, "check", "rules", plainRules).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	cmd := exec.Command(promtool, "test", "rules", "rules_test.yaml")
	cmd.Dir = "testdata"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}

	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	raw, err := os.ReadFile("testdata/rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, r := range loadRules(t) {
		if !fires[r.Alert] || !quiet[r.Alert] {
			t.Errorf("alert %s: promtool tests firing %v, not firing %v: want both", r.Alert, fires[r.Alert], quiet[r.Alert])
		}
	}
}

func loadRules(t *testing.T) []dashtest.Rule {
	t.Helper()
	rules, err := dashtest.LoadRules(os.DirFS("."), plainRules)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

const runbookURL = "https://github.com/netprober/prober/blob/main/docs/runbook.md#"

// TestAlertsHaveRunbooks checks that every alert has a summary, a
// description, a severity and a runbook_url whose anchor is a section of
// docs/runbook.md that says how to confirm with prober trace.
func TestAlertsHaveRunbooks(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{} // GitHub anchor -> section text
	var cur string
	for _, line := range strings.Split(string(raw), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			cur = strings.ToLower(strings.ReplaceAll(strings.TrimSpace(h), " ", "-"))
			continue
		}
		if cur != "" {
			sections[cur] += line + "\n"
		}
	}
	for _, r := range loadRules(t) {
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" || r.Labels["severity"] == "" {
			t.Errorf("alert %s: want a summary, a description and a severity label", r.Alert)
		}
		anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbookURL)
		if !ok || anchor != strings.ToLower(r.Alert) {
			t.Errorf("alert %s: runbook_url %q, want %s%s", r.Alert, r.Annotations["runbook_url"], runbookURL, strings.ToLower(r.Alert))
			continue
		}
		body, ok := sections[anchor]
		if !ok {
			t.Errorf("alert %s: docs/runbook.md has no section \"## %s\"", r.Alert, r.Alert)
			continue
		}
		if r.Alert != "ProberMatrixAbsent" && !strings.Contains(body, "prober trace") {
			t.Errorf("alert %s: its runbook section does not say how to confirm with prober trace", r.Alert)
		}
	}
	i := slices.IndexFunc(loadRules(t), func(r dashtest.Rule) bool { return r.Alert == "ProberSuspect" })
	if i < 0 || !strings.Contains(loadRules(t)[i].Annotations["summary"], "$labels.name") {
		t.Errorf("no ProberSuspect alert whose summary names the device ($labels.name)")
	}
}
