package config

import (
	"testing"
	"time"
)

func TestTraceDefaults(t *testing.T) {
	t.Parallel()
	c, err := LoadAgent("testdata/good/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Probing.Trace
	if !tr.On() || tr.Interval.D() != 5*time.Minute || tr.BudgetPerMinute != DefaultTraceBudgetPerMinute || tr.MaxTTL != 16 || tr.Probes != 3 {
		t.Errorf("trace defaults: %+v", tr)
	}
	c, err = LoadAgent("testdata/good/trace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if tr := c.Probing.Trace; tr.Interval.D() != 2*time.Minute || tr.BudgetPerMinute != 12 || tr.MaxTTL != 8 || tr.Probes != 2 {
		t.Errorf("trace.yaml: %+v", tr)
	}
}
