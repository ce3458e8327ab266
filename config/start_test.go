package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/netprober/prober/agent"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/hub"
)

// startCase is one file of testdata/start: the fields --check must name
// (none for a good file), and whether the runtime's own check, run on the
// file without config's validation, rejects it too (runtime): true where
// the range belongs to probe or matrix, false for config's own policy.
type startCase struct {
	fields  []string
	runtime bool
}

// TestCheckAndStartAgree proves that --check and a start agree on every
// file of testdata/start (and on every good file elsewhere): --check
// (config.LoadAgent, config.LoadMatrix) fails naming each field, and the
// start (the same load, then agent.ConfigFrom and agent.Check, or
// hub.Check: the part of agent.New and hub.New that runs before any
// socket opens) fails too; a
// good file passes both. For a range a runtime package owns, it also runs
// that package's check on the file as decoded and defaulted but not
// validated, so a range that drifted between config and the runtime, or a
// runtime check config does not make, fails here.
func TestCheckAndStartAgree(t *testing.T) {
	t.Parallel()
	agents := map[string]startCase{
		"good-edges.yaml":            {},
		"ports-overflow.yaml":        {[]string{"probing.maxTargets"}, true},
		"ports-wide.yaml":            {[]string{"probing.maxTargets"}, true},
		"trace-max-ttl.yaml":         {[]string{"probing.trace.maxTTL"}, true},
		"trace-probes-negative.yaml": {[]string{"probing.trace.probes"}, true},
		"trace-probes-policy.yaml":   {[]string{"probing.trace.probes"}, false},
		"dead-after-high.yaml":       {[]string{"probing.http2.deadAfter"}, true},
		"dead-after-negative.yaml":   {[]string{"probing.http2.deadAfter"}, true},
		"h2c-server-name.yaml":       {[]string{"targets[0].serverName"}, true},
		"timeout-negative.yaml":      {[]string{"probing.timeout"}, true},
		"target-unspecified.yaml":    {[]string{"targets[0].address", "targets[1].address"}, true},
	}
	matrices := map[string]startCase{
		"good-edges.yaml":     {},
		"healthy.yaml":        {[]string{"thresholds.healthy"}, true},
		"alpha.yaml":          {[]string{"thresholds.alpha"}, true},
		"min-score.yaml":      {[]string{"thresholds.minScore"}, true},
		"shares.yaml":         {[]string{"thresholds.voteShare", "thresholds.rackShare"}, true},
		"hops-host-bits.yaml": {[]string{"hops.192.0.2.1/24"}, true},
		"worst.yaml":          {[]string{"worst"}, true},
		"many.yaml": {[]string{"worst", "hops.192.0.2.1/24", "hops.nonsense", "hops.192.0.2.9",
			"thresholds.healthy", "thresholds.alpha", "thresholds.minScore"}, true},
		"window-short.yaml": {[]string{"window"}, false},
	}
	goodAgents, _ := filepath.Glob("testdata/good/*.yaml")
	goodMatrices, _ := filepath.Glob("testdata/matrix/*.yaml")
	if len(goodAgents) == 0 || len(goodMatrices) == 0 {
		t.Fatal("no testdata/good or testdata/matrix files")
	}

	// A start builds the runtime config once (agent.ConfigFrom), then
	// checks it.
	agentCheck := func(cfg *config.Agent) error {
		rc, err := agent.ConfigFrom(cfg)
		if err != nil {
			return err
		}
		return agent.Check(rc)
	}
	agentStart := func(path string) error {
		cfg, err := config.LoadAgent(path)
		if err != nil {
			return err
		}
		return agentCheck(cfg)
	}
	agentRuntime := func(path string, b []byte) error {
		cfg, err := config.DecodeAgent(path, b)
		if err != nil {
			return err
		}
		return agentCheck(cfg)
	}
	matrixStart := func(path string) error {
		cfg, err := config.LoadMatrix(path)
		if err != nil {
			return err
		}
		return hub.Check(cfg)
	}
	matrixRuntime := func(path string, b []byte) error {
		cfg, err := config.DecodeMatrix(path, b)
		if err != nil {
			return err
		}
		return hub.Check(cfg)
	}
	for _, kind := range []struct {
		name    string
		dir     string
		cases   map[string]startCase
		good    []string
		check   func(string) error
		start   func(string) error
		runtime func(string, []byte) error
	}{
		{"agent", "testdata/start/agent", agents, goodAgents, func(p string) error { _, err := config.LoadAgent(p); return err }, agentStart, agentRuntime},
		{"matrix", "testdata/start/matrix", matrices, goodMatrices, func(p string) error { _, err := config.LoadMatrix(p); return err }, matrixStart, matrixRuntime},
	} {
		files, _ := filepath.Glob(filepath.Join(kind.dir, "*.yaml"))
		for _, f := range files {
			if _, ok := kind.cases[filepath.Base(f)]; !ok {
				t.Errorf("%s: not in the table: give its fields", f)
			}
		}
		for name := range kind.cases {
			files = append(files, filepath.Join(kind.dir, name))
		}
		files = append(files, kind.good...)
		slices.Sort(files)
		files = slices.Compact(files)
		for _, path := range files {
			tc := kind.cases[filepath.Base(path)]
			if !strings.HasPrefix(path, kind.dir) {
				tc = startCase{}
			}
			t.Run(kind.name+"/"+path, func(t *testing.T) {
				t.Parallel()
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				checkErr, startErr, runtimeErr := kind.check(path), kind.start(path), kind.runtime(path, b)
				if len(tc.fields) == 0 {
					if checkErr != nil || startErr != nil || runtimeErr != nil {
						t.Errorf("good file:\n--check: %v\nstart: %v\nruntime check alone: %v", checkErr, startErr, runtimeErr)
					}
					return
				}
				if checkErr == nil {
					t.Fatalf("--check passed; want it to name %v (start: %v; runtime check alone: %v)", tc.fields, startErr, runtimeErr)
				}
				for _, field := range tc.fields {
					if !strings.Contains(checkErr.Error(), path+": "+field+":") {
						t.Errorf("--check: %v\ndoes not name %s", checkErr, field)
					}
				}
				if startErr == nil {
					t.Errorf("--check failed (%v) but the start passed", checkErr)
				}
				if tc.runtime && runtimeErr == nil {
					t.Errorf("--check failed (%v) but the runtime's own check passed the unvalidated file", checkErr)
				}
				if !tc.runtime && runtimeErr != nil {
					t.Errorf("runtime check failed (%v): the range is not config's alone; set runtime", runtimeErr)
				}
			})
		}
	}
}
