package dashtest

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Dashboard is the part of Grafana's dashboard JSON model the tests read.
type Dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	ID            *int    `json:"id"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []Panel `json:"panels"`
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel, or a row.
type Panel struct {
	ID              int                      `json:"id"`
	Type            string                   `json:"type"`
	Title           string                   `json:"title"`
	Description     string                   `json:"description"`
	Datasource      *Datasource              `json:"datasource"`
	GridPos         struct{ H, W, X, Y int } `json:"gridPos"`
	Targets         []Target                 `json:"targets"`
	Transformations []Transform              `json:"transformations"`
	Panels          []Panel                  `json:"panels"` // a collapsed row's
	FieldConfig     struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

// Datasource names a panel's, a target's or a variable's data source.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Target is one query of a panel.
type Target struct {
	RefID        string      `json:"refId"`
	Expr         string      `json:"expr"`
	LegendFormat string      `json:"legendFormat"`
	Format       string      `json:"format"`
	Instant      bool        `json:"instant"`
	Datasource   *Datasource `json:"datasource"`
}

// Transform is one of a panel's transformations.
type Transform struct {
	ID      string `json:"id"`
	Options struct {
		RowField    string         `json:"rowField"`
		ColumnField string         `json:"columnField"`
		IndexByName map[string]int `json:"indexByName"`
	} `json:"options"`
}

// Variable is a dashboard (template) variable.
type Variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *Datasource     `json:"datasource"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
}

// QueryText is a query variable's query, a string or Grafana 10's object.
func (v Variable) QueryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct{ Query string }
	json.Unmarshal(v.Query, &o)
	return o.Query
}

// LoadDashboards reads every *.json of fsys as a dashboard, by file name.
func LoadDashboards(fsys fs.FS) (map[string]Dashboard, error) {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no dashboards (*.json)")
	}
	out := map[string]Dashboard{}
	for _, name := range names {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var d Dashboard
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = d
	}
	return out, nil
}

// AllPanels flattens rows.
func AllPanels(ps []Panel) []Panel {
	var out []Panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, AllPanels(p.Panels)...)
	}
	return out
}

var legendLabel = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// UsedLabels are the labels a panel shows for a target: its legend's
// {{label}}s, the row and column of a groupingToMatrix (the matrix's x and
// y), and the label columns an organize transformation orders.
func UsedLabels(p Panel, tg Target) []string {
	var ls []string
	for _, m := range legendLabel.FindAllStringSubmatch(tg.LegendFormat, -1) {
		ls = append(ls, m[1])
	}
	for _, tr := range p.Transformations {
		switch tr.ID {
		case "groupingToMatrix":
			ls = append(ls, tr.Options.RowField, tr.Options.ColumnField)
		case "organize":
			for col := range tr.Options.IndexByName {
				if col != "Time" && !strings.HasPrefix(col, "Value") {
					ls = append(ls, col)
				}
			}
		}
	}
	slices.Sort(ls)
	return slices.Compact(ls)
}

var varRef = regexp.MustCompile(`\$(?:\{(\w+)\}|(\w+))`)

// VarRefs are the variables expr uses ($node, ${node}), in order.
func VarRefs(expr string) []string {
	var out []string
	for _, m := range varRef.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1]+m[2])
	}
	return out
}

// Expand replaces expr's variables by their values ("" when unset).
func Expand(expr string, values map[string]string) string {
	return varRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		return values[m[1]+m[2]]
	})
}

// Rule is an alerting rule of a rule file.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// LoadRules reads the alerting rules of the rule file name in fsys,
// strictly; a file without rules is an error.
func LoadRules(fsys fs.FS, name string) ([]Rule, error) {
	var f struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	}
	raw, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var rules []Rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("%s: no rules", name)
	}
	return rules, nil
}
