package dashboards

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/netprober/prober/dashboards/dashtest"
)

// latestSchemaVersion is the dashboard schema version of Grafana that the
// foundation SDK's types describe (its default for a new dashboard).
func latestSchemaVersion() uint16 { return dashboard.NewDashboard().SchemaVersion }

// sdkError is err unless it is the SDK's empty list of errors, which it
// returns as a non-nil error.
func sdkError(err error) error {
	var be cog.BuildErrors
	if errors.As(err, &be) && len(be) == 0 {
		return nil
	}
	return err
}

// TestGrafanaSchema reads every dashboard with Grafana's own Go types
// (grafana-foundation-sdk, generated from Grafana's schemas, with every
// core panel and datasource plugin registered): strictly, so that a
// missing required field, a field of the wrong type or an unknown panel
// option fails, then through their Validate. Grafana migrates a dashboard
// older than its schema on load; one at the latest version is loaded as
// it is.
func TestGrafanaSchema(t *testing.T) {
	t.Parallel()
	plugins.RegisterDefaultPlugins()
	for _, name := range dashboardFiles(t) {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard.Dashboard
		if err := sdkError(d.UnmarshalJSONStrict(raw)); err != nil {
			t.Errorf("%s, read strictly as Grafana's dashboard schema:\n%v", name, err)
			continue
		}
		if err := sdkError(d.Validate()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if d.SchemaVersion != latestSchemaVersion() {
			t.Errorf("%s: schemaVersion %d, want %d (Grafana's latest: no migration on load)", name, d.SchemaVersion, latestSchemaVersion())
		}
		// Each panel on its own too: the SDK's panel-or-row reader drops
		// a panel it read without error (it returns an empty error list
		// as an error), so the dashboard's Validate never sees them.
		var generic struct {
			Panels []json.RawMessage `json:"panels"`
		}
		if err := json.Unmarshal(raw, &generic); err != nil {
			t.Fatal(err)
		}
		n := 0
		// A collapsed row's panels join the list as it is walked.
		for i := 0; i < len(generic.Panels); i++ {
			rp := generic.Panels[i]
			var kind struct {
				Type   string            `json:"type"`
				Panels []json.RawMessage `json:"panels"`
			}
			if err := json.Unmarshal(rp, &kind); err != nil {
				t.Fatal(err)
			}
			if kind.Type == "row" {
				var row dashboard.RowPanel
				err = errors.Join(sdkError(row.UnmarshalJSONStrict(rp)), sdkError(row.Validate()))
				generic.Panels = append(generic.Panels, kind.Panels...)
			} else {
				var p dashboard.Panel
				err = errors.Join(sdkError(p.UnmarshalJSONStrict(rp)), sdkError(p.Validate()))
				n++
			}
			if err != nil {
				t.Errorf("%s: panels[%d] (%s): %v", name, i, kind.Type, err)
			}
		}
		if n == 0 {
			t.Errorf("%s: no panel read", name)
		}
	}
}

// rangeFunc is a PromQL function over a range vector, with its range.
var rangeFunc = regexp.MustCompile(`\b(rate|irate|increase|delta|idelta|deriv|avg_over_time|max_over_time|min_over_time|sum_over_time|changes|resets)\s*\(([^\[\]]*)\[([^\]]+)\]`)

// counter is a counter metric name (ending _total) in a PromQL expression.
var counter = regexp.MustCompile(`\b[a-zA-Z_:][a-zA-Z0-9_:]*_total\b`)

// TestDashboardLintRules holds the dashboards to Grafana's dashboard-linter
// rules that TestDashboardModel does not already check (the datasource
// variable, every panel's and target's datasource, no panel without
// queries, titles and descriptions are there): a unit on every panel
// that plots numbers, $__rate_interval as every rate's range, and no
// counter read without rate or increase.
func TestDashboardLintRules(t *testing.T) {
	t.Parallel()
	// Tables mix text and number columns: their units are per column.
	unitless := map[string]bool{"row": true, "text": true, "table": true}
	ranges := 0
	for name, d := range loadDashboards(t) {
		for _, p := range dashtest.AllPanels(d.Panels) {
			where := fmt.Sprintf("%s: panel %d %q", name, p.ID, p.Title)
			if !unitless[p.Type] && p.FieldConfig.Defaults.Unit == "" {
				t.Errorf("%s: a %s panel without a unit (panel-units-rule)", where, p.Type)
			}
			for _, tg := range p.Targets {
				for _, m := range rangeFunc.FindAllStringSubmatch(tg.Expr, -1) {
					ranges++
					if m[3] != "$__rate_interval" {
						t.Errorf("%s: target %s: %s(...[%s]): use [$__rate_interval] (target-rate-interval-rule)", where, tg.RefID, m[1], m[3])
					}
				}
				for _, loc := range counter.FindAllStringIndex(tg.Expr, -1) {
					if !insideRange(tg.Expr, loc[0]) {
						t.Errorf("%s: target %s reads counter %s without rate or increase (target-counter-agg-rule)", where, tg.RefID, tg.Expr[loc[0]:loc[1]])
					}
				}
			}
		}
	}
	if ranges == 0 {
		t.Error("no rate in any dashboard: the range rules read nothing")
	}
}

// insideRange reports whether the metric at offset i of expr is the
// argument of a range function such as rate(...[...]).
func insideRange(expr string, i int) bool {
	for _, m := range rangeFunc.FindAllStringSubmatchIndex(expr, -1) {
		if m[4] <= i && i < m[5] {
			return true
		}
	}
	return false
}
