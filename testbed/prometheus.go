package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// PrometheusSpec says how to run a Prometheus server in a lab namespace.
type PrometheusSpec struct {
	// Host is the lab host or router whose namespace it runs in; it
	// listens on a free port of that namespace's loopback.
	Host string
	// Path is the prometheus program; "" looks it up (LookPrometheus).
	Path string
	// Config is its configuration (prometheus.yml), written as JSON,
	// which YAML readers take.
	Config any
	// Ready bounds the wait until it serves queries; 0 means 30 s.
	Ready time.Duration
	// TempDir is where its directory (configuration, TSDB, log) is
	// made; "" means os.TempDir().
	TempDir string
}

// LookPrometheus finds the prometheus program: on PATH, which is where
// Debian's prometheus package (hack/deps.sh) puts it.
func LookPrometheus() (string, error) {
	p, err := exec.LookPath("prometheus")
	if err != nil {
		return "", fmt.Errorf("prometheus not found (Debian package prometheus; hack/deps.sh installs it): %w", err)
	}
	return p, nil
}

// Prometheus is a Prometheus server started by StartPrometheus: its
// configuration, TSDB and log in a temporary directory that Close
// removes.
type Prometheus struct {
	*Process
	dir    string
	client *PromClient
}

// URL is the server's base URL, in its namespace.
func (p *Prometheus) URL() string { return p.client.URL }

// Client queries the server from inside its namespace.
func (p *Prometheus) Client() *PromClient { return p.client }

// Close stops the server and removes its directory.
func (p *Prometheus) Close() error {
	var err error
	if p.Process != nil {
		err = p.Process.Close()
	}
	p.client.HTTP.CloseIdleConnections()
	return errors.Join(err, os.RemoveAll(p.dir))
}

// PromClient is a small client of Prometheus's HTTP API.
type PromClient struct {
	URL  string // the server's base URL, such as http://127.0.0.1:9090
	HTTP *http.Client
}

// Sample is one series of an instant query's result.
type Sample struct {
	Metric map[string]string // its labels, __name__ included when kept
	Value  float64
}

// Query runs an instant query, whose result must be a vector.
func (c *PromClient) Query(ctx context.Context, expr string) ([]Sample, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := c.call(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s, want vector", data.ResultType)
	}
	out := make([]Sample, 0, len(data.Result))
	for _, r := range data.Result {
		s := Sample{Metric: r.Metric}
		if v, ok := r.Value[1].(string); ok {
			s.Value, _ = strconv.ParseFloat(v, 64)
		}
		out = append(out, s)
	}
	return out, nil
}

// LabelValues returns the values label takes, in the series match selects
// when it is not empty.
func (c *PromClient) LabelValues(ctx context.Context, label, match string) ([]string, error) {
	params := url.Values{}
	if match != "" {
		params.Set("match[]", match)
	}
	var vals []string
	err := c.call(ctx, "/api/v1/label/"+url.PathEscape(label)+"/values", params, &vals)
	return vals, err
}

// AlertingRule is an alerting rule's state.
type AlertingRule struct {
	Name      string        `json:"name"`
	Health    string        `json:"health"` // ok, err or unknown
	LastError string        `json:"lastError"`
	Alerts    []ActiveAlert `json:"alerts"`
}

// ActiveAlert is an alert of a rule that is pending or firing.
type ActiveAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"` // pending or firing
}

// AlertingRules returns every alerting rule the server evaluates.
func (c *PromClient) AlertingRules(ctx context.Context) ([]AlertingRule, error) {
	var data struct {
		Groups []struct {
			Rules []AlertingRule `json:"rules"`
		} `json:"groups"`
	}
	if err := c.call(ctx, "/api/v1/rules", url.Values{"type": {"alert"}}, &data); err != nil {
		return nil, err
	}
	var out []AlertingRule
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// call GETs an API path and decodes the data of a success into data. An
// error answer (400, 422) is an error carrying Prometheus's message.
func (c *PromClient) call(ctx context.Context, path string, params url.Values, data any) error {
	body, status, err := get(ctx, c.HTTP, c.URL+path+"?"+params.Encode())
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusBadRequest && status != http.StatusUnprocessableEntity {
		return fmt.Errorf("GET %s: %d %s", path, status, http.StatusText(status))
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", path, r.Error)
	}
	return json.Unmarshal(r.Data, data)
}
