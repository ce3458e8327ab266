package hub

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/netprober/prober/api"
)

// The page orders its views by api's protocols and path classes: a
// protocol added to api and not to app.js would sort last, unnamed.
func TestPageKnowsTheVocabulary(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("app.js")
	if err != nil {
		t.Fatal(err)
	}
	list := func(name string) []string {
		m := regexp.MustCompile(`const ` + name + ` = (\[[^\]]*\]);`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("app.js declares no %s", name)
		}
		var out []string
		if err := json.Unmarshal(m[1], &out); err != nil {
			t.Fatalf("app.js %s: %v", name, err)
		}
		return out
	}
	if got := list("PROTOCOLS"); !slices.Equal(got, api.Protocols) {
		t.Errorf("app.js PROTOCOLS %q, api.Protocols %q", got, api.Protocols)
	}
	paths := []string{api.PathNodeToNode, api.PathNodeToPod, api.PathPodToNode, api.PathPodToPod, api.PathNodeToLB, api.PathPodToLB}
	if got := list("PATHS"); !slices.Equal(got, paths) {
		t.Errorf("app.js PATHS %q, want %q", got, paths)
	}
}
