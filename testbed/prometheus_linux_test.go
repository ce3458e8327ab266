package testbed

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
)

// TestPrometheus runs prometheus in a lab namespace, scraping an exporter
// that listens only on that namespace's loopback, and reads the series,
// a label's values and an alerting rule back through PromClient. A
// configuration prometheus refuses fails StartPrometheus at once and
// leaves no directory behind.
func TestPrometheus(t *testing.T) {
	bin, err := LookPrometheus()
	if err != nil {
		if os.Getenv("PROBER_REQUIRE_TOOLS") != "" {
			t.Fatalf("%v, and PROBER_REQUIRE_TOOLS is set", err)
		}
		t.Skip(err)
	}
	f := labtest.Up(t, lab.Spec{Spines: 1, Racks: 1, NodesPerRack: 1, PodsPerNode: -1})
	n11, _ := f.Host("n11")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The exporter's socket is n11's: only a prometheus in n11 reaches it.
	var ln net.Listener
	if err := lab.Do(n11.Namespace, func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:0"); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "# TYPE testbed_up gauge\ntestbed_up{node=\"n11\"} 1")
	})}
	go srv.Serve(ln)
	defer srv.Close()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("groups:\n- name: g\n  rules:\n  - alert: TestbedUp\n    expr: testbed_up == 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	p, err := StartPrometheus(ctx, f, PrometheusSpec{Host: "n11", Path: bin, Config: map[string]any{
		"global":         map[string]string{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files":     []string{rules},
		"scrape_configs": []map[string]any{{"job_name": "exporter", "static_configs": []map[string]any{{"targets": []string{ln.Addr().String()}}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if _, err := os.Stat(p.dir); err == nil {
			t.Errorf("Close left %s", p.dir)
		}
	}()
	if !strings.HasPrefix(p.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %s, want loopback", p.URL())
	}
	c := p.Client()
	var samples []Sample
	for deadline := time.Now().Add(20 * time.Second); len(samples) == 0; time.Sleep(200 * time.Millisecond) {
		if samples, err = c.Query(ctx, "testbed_up"); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("testbed_up not scraped within 20s")
		}
	}
	if s := samples[0]; s.Value != 1 || s.Metric["job"] != "exporter" || s.Metric["node"] != "n11" {
		t.Errorf("sample %+v, want testbed_up{job=exporter,node=n11} 1", s)
	}
	if vals, err := c.LabelValues(ctx, "node", "testbed_up"); err != nil || !slices.Equal(vals, []string{"n11"}) {
		t.Errorf("label values of node: %v %v, want [n11]", vals, err)
	}
	if _, err := c.Query(ctx, "testbed_up{"); err == nil || !strings.Contains(err.Error(), "parse error") {
		t.Errorf("a bad query: %v, want Prometheus's parse error", err)
	}
	var rs []AlertingRule
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if rs, err = c.AlertingRules(ctx); err != nil {
			t.Fatal(err)
		}
		if len(rs) == 1 && len(rs[0].Alerts) == 1 || time.Now().After(deadline) {
			break
		}
	}
	if len(rs) != 1 || rs[0].Name != "TestbedUp" || rs[0].Health != "ok" || len(rs[0].Alerts) != 1 || rs[0].Alerts[0].State != "firing" {
		t.Errorf("rules %+v, want TestbedUp healthy and firing", rs)
	}

	t.Run("a refused config", func(t *testing.T) {
		begin := time.Now()
		tmp := t.TempDir()
		_, err := StartPrometheus(ctx, f, PrometheusSpec{Host: "n11", Path: bin, Config: map[string]any{"bogus": 1}, TempDir: tmp})
		if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "bogus") {
			t.Errorf("StartPrometheus: %v, want its exit and its complaint", err)
		}
		if took := time.Since(begin); took > 10*time.Second {
			t.Errorf("failed after %v, want at once", took)
		}
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Errorf("a failed start left %v in %s", left, tmp)
		}
	})
}
