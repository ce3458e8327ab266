package mixin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-jsonnet"
	"sigs.k8s.io/yaml"
)

// evaluate evaluates the mixin with config over its _config, as a
// consumer's jsonnet would, returning its alerts and dashboards.
func evaluate(t *testing.T, config string) (alerts map[string]any, dashboards map[string]any, err error) {
	t.Helper()
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{})
	out, err := vm.EvaluateAnonymousSnippet("consumer.jsonnet", `
local m = (import 'mixin.libsonnet') + { _config+:: `+config+` };
{ alerts: m.prometheusAlerts, dashboards: m.grafanaDashboards }`)
	if err != nil {
		return nil, nil, err
	}
	var got struct{ Alerts, Dashboards map[string]any }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	return got.Alerts, got.Dashboards, nil
}

// decode reads a YAML or JSON file as generic JSON values.
func decode(t *testing.T, path string) any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// TestMixinIsWhatShips: evaluated with its defaults, the mixin's alerts
// are dashboards/alerts.yaml and its dashboards every dashboards/*.json,
// the same values the chart and deploy/ carry.
func TestMixinIsWhatShips(t *testing.T) {
	alerts, dashboards, err := evaluate(t, "{}")
	if err != nil {
		t.Fatal(err)
	}
	if want := decode(t, "../dashboards/alerts.yaml"); !reflect.DeepEqual(any(alerts), want) {
		t.Errorf("prometheusAlerts differ from dashboards/alerts.yaml: run go generate ./dashboards")
	}
	sources, _ := filepath.Glob("../dashboards/*.json")
	var names []string
	for _, src := range sources {
		name := filepath.Base(src)
		names = append(names, name)
		if !reflect.DeepEqual(dashboards[name], decode(t, src)) {
			t.Errorf("grafanaDashboards[%q] differs from dashboards/%s", name, name)
		}
	}
	var have []string
	for name := range dashboards {
		have = append(have, name)
	}
	slices.Sort(have)
	if !slices.Equal(have, names) {
		t.Errorf("grafanaDashboards has %v, dashboards/ %v: list every dashboard in mixin.libsonnet", have, names)
	}
	if len(names) == 0 {
		t.Fatal("no dashboards/*.json")
	}
}

// TestMixinConfig: _config moves every runbook link, keeping its anchor,
// and sets one alert's severity, leaving the rest as shipped; naming an
// alert it does not have is an error that says which.
func TestMixinConfig(t *testing.T) {
	shipped, _, err := evaluate(t, "{}")
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := evaluate(t, `{ runbookURL: 'https://wiki.example.com/rb', alertSeverity: { ProberSuspect: 'critical' } }`)
	if err != nil {
		t.Fatal(err)
	}
	rules := func(a map[string]any) []map[string]any {
		var out []map[string]any
		for _, g := range a["groups"].([]any) {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				out = append(out, r.(map[string]any))
			}
		}
		return out
	}
	was, now := rules(shipped), rules(got)
	if len(was) != len(now) || len(now) == 0 {
		t.Fatalf("%d rules, shipped %d", len(now), len(was))
	}
	links := 0
	for i, r := range now {
		name, _ := r["alert"].(string)
		if name == "" {
			continue
		}
		sev := r["labels"].(map[string]any)["severity"]
		wantSev := was[i]["labels"].(map[string]any)["severity"]
		if name == "ProberSuspect" {
			wantSev = "critical"
		}
		if sev != wantSev {
			t.Errorf("%s: severity %v, want %v", name, sev, wantSev)
		}
		ann, _ := r["annotations"].(map[string]any)
		u, _ := ann["runbook_url"].(string)
		old, _ := was[i]["annotations"].(map[string]any)["runbook_url"].(string)
		if old == "" {
			continue
		}
		links++
		_, anchor, _ := strings.Cut(old, "#")
		if u != "https://wiki.example.com/rb#"+anchor {
			t.Errorf("%s: runbook_url %q, want the wiki's #%s", name, u, anchor)
		}
	}
	if links == 0 {
		t.Error("no alert has a runbook_url")
	}
	if _, _, err := evaluate(t, `{ alertSeverity: { ProberSuspcet: 'critical' } }`); err == nil || !strings.Contains(err.Error(), "ProberSuspcet") {
		t.Errorf("a misspelt alert in alertSeverity: %v, want an error naming it", err)
	}
}
