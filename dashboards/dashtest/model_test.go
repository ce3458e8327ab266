package dashtest

import (
	"slices"
	"testing"
)

func TestExpand(t *testing.T) {
	t.Parallel()
	values := map[string]string{"node": "n21", "__rate_interval": "10s"}
	cases := []struct{ expr, want string }{
		{`rate(x{node="$node"}[$__rate_interval])`, `rate(x{node="n21"}[10s])`},
		{`x{node="${node}"}`, `x{node="n21"}`},
		{`x{path=~"$path"}`, `x{path=~""}`},
	}
	for _, tc := range cases {
		if got := Expand(tc.expr, values); got != tc.want {
			t.Errorf("Expand(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
	if got, want := VarRefs(`x{a="$a", b="${b}"}[$__range]`), []string{"a", "b", "__range"}; !slices.Equal(got, want) {
		t.Errorf("VarRefs = %v, want %v", got, want)
	}
}

func TestUsedLabels(t *testing.T) {
	t.Parallel()
	var p Panel
	p.Transformations = make([]Transform, 2)
	p.Transformations[0].ID = "groupingToMatrix"
	p.Transformations[0].Options.RowField, p.Transformations[0].Options.ColumnField = "source", "target"
	p.Transformations[1].ID = "organize"
	p.Transformations[1].Options.IndexByName = map[string]int{"Time": 0, "kind": 1, "Value #A": 2, "name": 3}
	got := UsedLabels(p, Target{LegendFormat: "{{ source }} -> {{target}} {{protocol}}"})
	if want := []string{"kind", "name", "protocol", "source", "target"}; !slices.Equal(got, want) {
		t.Errorf("UsedLabels = %v, want %v", got, want)
	}
}

func TestParseLabelValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		q             string
		metric, label string
		ok            bool
	}{
		{"label_values(prober_probes_sent_total, node)", "prober_probes_sent_total", "node", true},
		{" label_values(node) ", "", "node", true},
		{"label_values(up{job=\"x\"}, node)", "", "", false},
		{"query_result(up)", "", "", false},
	}
	for _, tc := range cases {
		metric, label, ok := parseLabelValues(tc.q)
		if ok != tc.ok || metric != tc.metric || label != tc.label {
			t.Errorf("%q: got metric %q label %q ok %v, want %q %q %v", tc.q, metric, label, ok, tc.metric, tc.label, tc.ok)
		}
	}
}
