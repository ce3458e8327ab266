package probe

import (
	"slices"
	"testing"

	"github.com/netprober/prober/api"
)

// The engines' protocols are api's names, in api's order: the matrix
// refuses a report with any other.
func TestProtocolsAreAPIs(t *testing.T) {
	var got []string
	for _, p := range Protocols {
		got = append(got, string(p))
	}
	if !slices.Equal(got, api.Protocols) {
		t.Errorf("probe.Protocols %q, api.Protocols %q", got, api.Protocols)
	}
}
