package dashtest

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/netprober/prober/testbed"
)

// pending are query fragments whose metrics the code does not export yet,
// each with its reason (an issue): a panel or alert target containing one
// may return no data, which is a note. Once it returns data Check reports
// a problem, so that the entry is removed and the panel is held to the
// rule. Empty now: every panel must return data.
var pending []struct{ fragment, reason string }

func pendingReason(expr string) string {
	for _, p := range pending {
		if strings.Contains(expr, p.fragment) {
			return p.reason
		}
	}
	return ""
}

// Options say what Check queries and what it expects.
type Options struct {
	// URL is the Prometheus server's base URL, Client what reaches it.
	URL    string
	Client *http.Client
	// Dashboards holds the dashboards (*.json) and the rule file Rules
	// ("alerts.yaml" when empty) that Prometheus evaluates.
	Dashboards fs.FS
	Rules      string
	// Values are what the dashboards' variables are set to, each of
	// which its variable's query must offer, and Grafana's own
	// ($__rate_interval, $__interval, $__range: at least four scrape
	// intervals for the first).
	Values map[string]string
	// Firing are the alerts the situation must trip: pending or firing,
	// with an alert whose labels Match (nil matches any).
	Firing []Alert
	// Quiet are the alerts that must be neither pending nor firing.
	Quiet []string
	// MayLack are metrics the situation may have no series of, each with
	// why (a counter nothing has incremented yet): a panel target naming
	// one may return no data, and the metric need not exist.
	MayLack map[string]string
	// Empty are panels, by title, that the situation leaves without data,
	// each with why (a node nothing suspects): Check asserts every target
	// of theirs returns nothing.
	Empty map[string]string
}

// Alert names an alerting rule and the alert of it that is expected.
type Alert struct {
	Name  string
	Match func(labels map[string]string) bool
}

var metricRef = regexp.MustCompile(`\bprober_[a-z0-9_]+`)

var labelValuesRE = regexp.MustCompile(`^label_values\(\s*(?:([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// Check runs every check once against the Prometheus at o.URL: every
// query variable offers its value; every query of every panel returns
// series, each with the labels the panel shows; every alerting rule is
// loaded and evaluates cleanly, the Firing ones are tripped and the Quiet
// ones not; and every prober_* metric a dashboard or rule names exists.
// Problems are failures; notes are pending exemptions. Data takes some
// scrapes to arrive: call it until it returns no problems, or a deadline.
func Check(ctx context.Context, o Options) (problems, notes []string) {
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	prom := &testbed.PromClient{URL: o.URL, HTTP: o.Client}
	rulesFile := o.Rules
	if rulesFile == "" {
		rulesFile = "alerts.yaml"
	}
	dashboards, err := LoadDashboards(o.Dashboards)
	if err != nil {
		bad("dashboards: %v", err)
	}
	rules, err := LoadRules(o.Dashboards, rulesFile)
	if err != nil {
		bad("rules: %v", err)
	}
	var exprs []string
	for _, name := range slices.Sorted(maps.Keys(dashboards)) {
		d := dashboards[name]
		values := maps.Clone(o.Values)
		if values == nil {
			values = map[string]string{}
		}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			opts, err := labelValues(ctx, prom, v.QueryText())
			switch {
			case err != nil:
				bad("%s: variable %s: %v", name, v.Name, err)
			case !slices.Contains(opts, o.Values[v.Name]):
				bad("%s: variable %s offers %v, want %q among them", name, v.Name, opts, o.Values[v.Name])
			}
		}
		for _, p := range AllPanels(d.Panels) {
			for _, tg := range p.Targets {
				where := fmt.Sprintf("%s: panel %q target %s", name, p.Title, tg.RefID)
				expr := Expand(tg.Expr, values)
				exprs = append(exprs, expr)
				series, err := prom.Query(ctx, expr)
				if err != nil {
					bad("%s: %v\n  query: %s", where, err, expr)
					continue
				}
				if why, ok := o.Empty[p.Title]; ok {
					if len(series) > 0 {
						bad("%s: returns %d series, want none (%s): %v\n  query: %s", where, len(series), why, series[0].Metric, expr)
					}
					continue
				}
				if why := lackReason(o.MayLack, tg.Expr); why != "" && len(series) == 0 {
					notes = append(notes, fmt.Sprintf("%s: no data, allowed (%s)", where, why))
					continue
				}
				reason := pendingReason(tg.Expr)
				switch {
				case len(series) == 0 && reason != "":
					notes = append(notes, fmt.Sprintf("%s: no data, exempt (%s)", where, reason))
					continue
				case len(series) == 0:
					bad("%s: no data\n  query: %s", where, expr)
					continue
				case reason != "":
					bad("%s: returns data now: remove its entry (%s) from pending in dashboards/dashtest", where, reason)
				}
				for _, l := range UsedLabels(p, tg) {
					for _, s := range series {
						if s.Metric[l] == "" {
							bad("%s: shows label %q, but series %v lacks it\n  query: %s", where, l, s.Metric, expr)
							break
						}
					}
				}
			}
		}
	}

	// Every rule evaluates without error.
	groups, err := prom.AlertingRules(ctx)
	if err != nil {
		bad("rules: %v", err)
	}
	loaded := map[string]bool{}
	for _, r := range groups {
		loaded[r.Name] = true
		if r.Health != "ok" {
			bad("rule %s: health %q, last error %q", r.Name, r.Health, r.LastError)
		}
	}
	for _, r := range rules {
		exprs = append(exprs, r.Expr)
		if !loaded[r.Alert] {
			bad("alert %s: not loaded by Prometheus", r.Alert)
		}
	}
	for _, want := range o.Firing {
		if !Tripped(groups, want) {
			bad("alert %s: not pending or firing", want.Name)
		}
	}
	for _, name := range o.Quiet {
		for _, r := range groups {
			if r.Name == name && len(r.Alerts) > 0 {
				bad("alert %s: %s, want neither pending nor firing", name, r.Alerts[0].State)
			}
		}
	}

	// Every prober_* metric named anywhere exists, or is pending: a
	// metric renamed in code fails here even where a query would still
	// return data (an `or`, a ratio's other side).
	names, err := prom.LabelValues(ctx, "__name__", "")
	if err != nil {
		bad("metric names: %v", err)
	}
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metricRef.FindAllString(e, -1) {
			if seen[m] {
				continue
			}
			seen[m] = true
			if _, ok := o.MayLack[m]; ok {
				continue
			}
			if !slices.Contains(names, m) && pendingReason(m) == "" {
				bad("metric %s is named by a dashboard or rule but exported by no agent or matrix: renamed?", m)
			}
		}
	}
	return problems, notes
}

// lackReason is why an expression may return no data: it names a metric
// of mayLack.
func lackReason(mayLack map[string]string, expr string) string {
	for _, m := range metricRef.FindAllString(expr, -1) {
		if why := mayLack[m]; why != "" {
			return m + ": " + why
		}
	}
	return ""
}

// Tripped reports whether an alert of rule want.Name is pending or firing
// with labels want.Match takes.
func Tripped(groups []testbed.AlertingRule, want Alert) bool {
	for _, r := range groups {
		for _, a := range r.Alerts {
			if r.Name == want.Name && (a.State == "pending" || a.State == "firing") && (want.Match == nil || want.Match(a.Labels)) {
				return true
			}
		}
	}
	return false
}

// labelValues answers a Grafana label_values([metric, ]label) query as
// Grafana does, through the label values endpoint.
func labelValues(ctx context.Context, prom *testbed.PromClient, q string) ([]string, error) {
	metric, label, ok := parseLabelValues(q)
	if !ok {
		return nil, fmt.Errorf("%q is not label_values([metric, ]label)", q)
	}
	return prom.LabelValues(ctx, label, metric)
}

func parseLabelValues(q string) (metric, label string, ok bool) {
	m := labelValuesRE.FindStringSubmatch(strings.TrimSpace(q))
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}
