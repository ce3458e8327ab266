package dashboards

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
)

// pending are query fragments whose metrics the code does not export yet,
// each with its reason (an issue): a panel or alert target containing one
// may return no data, which is logged. Once it returns data the test
// fails, so that the entry is removed and the panel is held to the rule.
// Empty now: every panel must return data.
var pending []struct{ fragment, reason string }

func pendingReason(expr string) string {
	for _, p := range pending {
		if strings.Contains(expr, p.fragment) {
			return p.reason
		}
	}
	return ""
}

// chosen are the values the tests give the dashboards' variables: each
// must be among the values the variable's own query returns. n21 is the
// node with the broken NIC.
var chosen = map[string]string{"node": "n21", "path": "node_to_node", "protocol": "tcp_syn"}

// builtinValues stand in for Grafana's own variables: $__rate_interval is
// at least 4 scrape intervals.
var builtinValues = map[string]string{"__rate_interval": "10s", "__interval": "2s", "__range": "1m"}

// TestLive is the dashboards' and alerts' proof against the real thing: a
// 2-spine, 2-rack fabric in network namespaces, agents on three of its
// four nodes (n22's agent is missing on purpose), the matrix, and a real
// Prometheus in n11's namespace scraping them every second and evaluating
// the rules, with 30% loss on n21's NIC. Then every query of every panel
// must return series with the labels the panel shows, every query
// variable must offer the value the test picks, every alert rule must
// evaluate cleanly and those the fault trips must be pending or firing,
// every prober_* metric the dashboards and rules name must exist, and
// every /metrics endpoint must pass promtool check metrics.
func TestLive(t *testing.T) {
	promBin := tool(t, "prometheus")
	promtool := tool(t, "promtool")
	labtest.NeedNetAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()

	dir := t.TempDir()
	exe := buildProber(ctx, t, dir)
	f := labtest.Up(t, lab.Spec{Spines: 2, Racks: 2, NodesPerRack: 2, PodsPerNode: -1})
	nodes := f.Nodes()
	if len(nodes) != 4 {
		t.Fatalf("want 4 nodes, the fabric has %d", len(nodes))
	}
	withAgent := nodes[:3] // n11 n12 n21; n22 has none
	if withAgent[2].Name != "n21" || nodes[3].Name != "n22" {
		t.Fatalf("unexpected node order %v", nodes)
	}
	n11 := nodes[0]

	var procs []*process
	t.Cleanup(func() {
		for _, p := range slices.Backward(procs) {
			p.stop(t)
		}
	})
	for i, self := range withAgent {
		var targets []map[string]any
		for _, peer := range nodes {
			if peer.Name != self.Name {
				targets = append(targets, map[string]any{"name": peer.Name, "address": peer.Addr.String(), "class": "node", "port": 9808, "labels": map[string]string{"rack": peer.Rack}})
			}
		}
		cfg := map[string]any{
			"name": self.Name, "class": "node", "listen": self.Addr.String() + ":9808",
			"labels": map[string]string{"rack": self.Rack, "zone": self.Zone}, "log": "json",
			"probing": map[string]any{
				"interval": "100ms", "timeout": "200ms", "window": "10s", "flows": 4,
				// http2_ping counts once the agent has the engine (issue 3).
				"protocols":          []string{"icmp", "tcp_syn", "http2_ping"},
				"maxProbesPerSecond": 500, "maxTargets": 4, "sourcePortBase": 61000 + 100*i,
			},
			"targets": targets,
		}
		procs = append(procs, startIn(ctx, t, f, self.Namespace, dir, "agent-"+self.Name, exe, "agent", "--config", writeJSON(t, dir, "agent-"+self.Name, cfg)))
	}
	var agentURLs []string
	for _, n := range nodes {
		agentURLs = append(agentURLs, "http://"+n.Addr.String()+":9808")
	}
	matrixAddr := n11.Addr.String() + ":9809"
	procs = append(procs, startIn(ctx, t, f, n11.Namespace, dir, "matrix", exe, "matrix", "--config", writeJSON(t, dir, "matrix", map[string]any{
		"listen": matrixAddr, "agents": agentURLs, "groupBy": "node",
		"interval": "1s", "window": "10s", "timeout": "500ms", "hops": f.Hops(), "log": "json",
	})))

	// Prometheus listens on 127.0.0.1 inside n11's namespace.
	var promAddr string
	if err := lab.Do(n11.Namespace, func() error {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		promAddr = l.Addr().String()
		return l.Close()
	}); err != nil {
		t.Fatal(err)
	}
	rulesPath, err := filepath.Abs(plainRules)
	if err != nil {
		t.Fatal(err)
	}
	var agentTargets []map[string]any
	for _, n := range withAgent {
		agentTargets = append(agentTargets, map[string]any{"targets": []string{n.Addr.String() + ":9808"}, "labels": map[string]string{"node": n.Name}})
	}
	promCfg := writeJSON(t, dir, "prometheus", map[string]any{
		"global":     map[string]string{"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
		"rule_files": []string{rulesPath},
		"scrape_configs": []map[string]any{
			{"job_name": "prober-agent", "static_configs": agentTargets},
			{"job_name": "prober-matrix", "static_configs": []map[string]any{{"targets": []string{matrixAddr}}}},
		},
	})
	procs = append(procs, startIn(ctx, t, f, n11.Namespace, dir, "prometheus", promBin,
		"--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--storage.tsdb.retention.time=1h", "--web.listen-address="+promAddr, "--log.level=warn"))

	if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultHostNIC, Host: "n21", Permille: 300}); err != nil {
		t.Fatal(err)
	}
	t.Logf("lab, %d agents, matrix, prometheus and fault up after %v", len(withAgent), time.Since(start).Round(time.Millisecond))

	prom := &promAPI{base: "http://" + promAddr, client: lab.HTTPClient(n11.Namespace, 5*time.Second)}
	defer prom.client.CloseIdleConnections()
	dashboards := loadDashboards(t)
	rules := loadRules(t)

	// Poll until every check passes or the deadline: windows, rates and
	// the matrix's localization need some seconds of data.
	deadline := time.Now().Add(90 * time.Second)
	var problems, notes []string
	for attempt := 0; ; attempt++ {
		problems, notes = checkAll(ctx, prom, dashboards, rules)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
	for _, n := range notes {
		t.Log(n)
	}
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("queries checked after %v", time.Since(start).Round(time.Millisecond))

	// promtool check metrics on every /metrics endpoint, with the fault
	// cleared: n21's NIC would time out a third of the fetches.
	if err := f.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	client := lab.HTTPClient(n11.Namespace, 5*time.Second)
	defer client.CloseIdleConnections()
	endpoints := []string{"http://" + matrixAddr + "/metrics"}
	for _, n := range withAgent {
		endpoints = append(endpoints, "http://"+n.Addr.String()+":9808/metrics")
	}
	for _, u := range endpoints {
		body, err := get(ctx, client, u)
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(string(body))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics %s: %v\n%s", u, err, out)
		}
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// checkAll runs every check once; problems fail the test, notes are
// pending exemptions.
func checkAll(ctx context.Context, prom *promAPI, dashboards map[string]dashboard, rules []rule) (problems, notes []string) {
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var exprs []string
	for _, name := range slices.Sorted(maps.Keys(dashboards)) {
		d := dashboards[name]
		values := map[string]string{}
		for k, v := range builtinValues {
			values[k] = v
		}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			opts, err := prom.labelValues(ctx, v.queryText())
			switch {
			case err != nil:
				bad("%s: variable %s: %v", name, v.Name, err)
			case !slices.Contains(opts, chosen[v.Name]):
				bad("%s: variable %s offers %v, want %q among them", name, v.Name, opts, chosen[v.Name])
			}
			values[v.Name] = chosen[v.Name]
		}
		for _, p := range allPanels(d.Panels) {
			for _, tg := range p.Targets {
				where := fmt.Sprintf("%s: panel %q target %s", name, p.Title, tg.RefID)
				expr := varRef.ReplaceAllStringFunc(tg.Expr, func(ref string) string {
					m := varRef.FindStringSubmatch(ref)
					return values[m[1]+m[2]]
				})
				exprs = append(exprs, expr)
				series, err := prom.query(ctx, expr)
				if err != nil {
					bad("%s: %v\n  query: %s", where, err, expr)
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
					bad("%s: returns data now: remove its entry (%s) from pending in live_linux_test.go", where, reason)
				}
				for _, l := range usedLabels(p, tg) {
					for _, s := range series {
						if s[l] == "" {
							bad("%s: shows label %q, but series %v lacks it\n  query: %s", where, l, s, expr)
							break
						}
					}
				}
			}
		}
	}

	// Every rule evaluates without error.
	groups, err := prom.rules(ctx)
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
	// What the fault and the missing agent must trip (the rules' for:
	// durations are minutes, so they are pending here; promtool tests
	// cover firing).
	tripped := func(alert string, match func(a map[string]string) bool) {
		for _, r := range groups {
			for _, a := range r.Alerts {
				if r.Name == alert && (a.State == "pending" || a.State == "firing") && match(a.Labels) {
					return
				}
			}
		}
		bad("alert %s: not pending or firing", alert)
	}
	tripped("ProberSuspect", func(a map[string]string) bool { return strings.Contains(a["name"], "n21") })
	tripped("ProberLossAboveSLA", func(a map[string]string) bool { return a["source"] == "n21" || a["target"] == "n21" })
	tripped("ProberAgentsMissing", func(map[string]string) bool { return true })
	tripped("ProberProbesFailingToSend", func(a map[string]string) bool { return a["node"] == "n21" })
	for _, r := range groups {
		if r.Name == "ProberMatrixAbsent" && len(r.Alerts) > 0 {
			bad("ProberMatrixAbsent is %s while the matrix is scraped", r.Alerts[0].State)
		}
	}

	// Every prober_* metric named anywhere exists, or is pending: a
	// metric renamed in code fails here even where a query would still
	// return data (an `or`, a ratio's other side).
	names, err := prom.labelValues(ctx, "label_values(__name__)")
	if err != nil {
		bad("metric names: %v", err)
	}
	metricRef := regexp.MustCompile(`\bprober_[a-z0-9_]+`)
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metricRef.FindAllString(e, -1) {
			if seen[m] {
				continue
			}
			seen[m] = true
			if !slices.Contains(names, m) && pendingReason(m) == "" {
				bad("metric %s is named by a dashboard or rule but exported by no agent or matrix: renamed?", m)
			}
		}
	}
	return problems, notes
}

// promAPI is a small client of Prometheus's HTTP API.
type promAPI struct {
	base   string
	client *http.Client
}

func (p *promAPI) call(ctx context.Context, path string, params url.Values, data any) error {
	body, err := get(ctx, p.client, p.base+path+"?"+params.Encode())
	if err != nil {
		return err
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

// query runs an instant query and returns the label sets of its series.
func (p *promAPI) query(ctx context.Context, expr string) ([]map[string]string, error) {
	var data struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	if err := p.call(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s, want vector", data.ResultType)
	}
	var out []map[string]string
	for _, r := range data.Result {
		var s struct {
			Metric map[string]string `json:"metric"`
		}
		if err := json.Unmarshal(r, &s); err != nil {
			return nil, err
		}
		out = append(out, s.Metric)
	}
	return out, nil
}

var labelValuesRE = regexp.MustCompile(`^label_values\(\s*(?:([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// labelValues answers a Grafana label_values(metric, label) query as
// Grafana does, through the label values endpoint.
func (p *promAPI) labelValues(ctx context.Context, q string) ([]string, error) {
	m := labelValuesRE.FindStringSubmatch(strings.TrimSpace(q))
	if m == nil {
		return nil, fmt.Errorf("%q is not label_values([metric, ]label)", q)
	}
	params := url.Values{}
	if m[1] != "" {
		params.Set("match[]", m[1])
	}
	var vals []string
	err := p.call(ctx, "/api/v1/label/"+m[2]+"/values", params, &vals)
	return vals, err
}

type ruleState struct {
	Name      string `json:"name"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	Alerts    []struct {
		Labels map[string]string `json:"labels"`
		State  string            `json:"state"`
	} `json:"alerts"`
}

func (p *promAPI) rules(ctx context.Context) ([]ruleState, error) {
	var data struct {
		Groups []struct {
			Rules []ruleState `json:"rules"`
		} `json:"groups"`
	}
	if err := p.call(ctx, "/api/v1/rules", url.Values{"type": {"alert"}}, &data); err != nil {
		return nil, err
	}
	var out []ruleState
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

func get(ctx context.Context, c *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusUnprocessableEntity {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return body, nil
}

// buildProber builds the prober binary into dir.
func buildProber(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not on PATH, needed to build prober: %v", err)
	}
	exe := filepath.Join(dir, "prober")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", exe, "./cmd/prober")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/prober: %v\n%s", err, out)
	}
	return exe
}

func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".yaml") // JSON is YAML
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// process is a program started in a lab namespace, logging to a file.
type process struct {
	name, log string
	cmd       *exec.Cmd
}

func startIn(ctx context.Context, t *testing.T, f *lab.Fabric, ns, dir, name, bin string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd, err := f.Command(ctx, ns, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	if err := lab.Start(cmd); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	return &process{name: name, log: logPath, cmd: cmd}
}

// stop ends the process with SIGTERM (SIGKILL after 5 s) and, if the test
// failed, logs the tail of its output.
func (p *process) stop(t *testing.T) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
	if t.Failed() {
		b, _ := os.ReadFile(p.log)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		t.Logf("%s's output ends:\n  %s", p.name, strings.Join(lines[max(0, len(lines)-8):], "\n  "))
	}
}
