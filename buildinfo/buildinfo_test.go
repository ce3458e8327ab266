package buildinfo

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCollector: prober_build_info is 1 with the stamped labels, and the
// User-Agent carries the same version.
func TestCollector(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(Collector())
	want := `# HELP prober_build_info Build information; the value is 1.
# TYPE prober_build_info gauge
prober_build_info{goversion="` + GoVersion() + `",revision="` + Revision + `",version="` + Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "prober_build_info"); err != nil {
		t.Error(err)
	}
	if ua := UserAgent("matrix"); ua != "prober-matrix/"+Version {
		t.Errorf("UserAgent = %q", ua)
	}
}
