package release

import (
	"strings"
	"testing"
)

// TestSemVer holds the versions `make chart` and the krew manifest stamp: a build's
// SemVer version as it is, anything else a pre-release of the chart's.
func TestSemVer(t *testing.T) {
	for _, c := range []struct{ build, want string }{
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v0.2.0-12-gabc1234-dirty", "0.2.0-12-gabc1234-dirty"},
		{"v1.0.0+meta", "1.0.0+meta"},
		{"8fdabc8", "0.1.0-8fdabc8"},
		{"8fdabc8-dirty", "0.1.0-8fdabc8-dirty"},
		{"0123456", "0.1.0-g0123456"},
		{"dev", "0.1.0-dev"},
		{"my build/x..y", "0.1.0-my-build-x.y"},
		{"", ""},
		{"...", ""},
	} {
		v, err := SemVer(c.build, "0.1.0")
		if c.want == "" {
			if err == nil {
				t.Errorf("%q: %s, want an error", c.build, v.String())
			}
			continue
		}
		if err != nil || v.String() != c.want {
			t.Errorf("%q: %s (%v), want %s", c.build, v.String(), err, c.want)
		}
	}
	if _, err := SemVer("dev", "one"); err == nil || !strings.Contains(err.Error(), `"one"`) {
		t.Errorf("a base version that is not SemVer: %v", err)
	}
}
