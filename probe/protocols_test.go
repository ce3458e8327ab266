package probe

import (
	"slices"
	"testing"

	"github.com/netprober/prober/api"
)

// The protocols a config names are api's, in api's order, and each is
// reported under names the matrix accepts; tcp_syn_mtu is tcp_syn's
// large probes (probing.pmtu), last.
func TestProtocolsAreAPIs(t *testing.T) {
	var got []string
	for _, p := range Protocols {
		got = append(got, string(p))
	}
	if !slices.Equal(got, api.ConfigProtocols) {
		t.Errorf("probe.Protocols %q, api.ConfigProtocols %q", got, api.ConfigProtocols)
	}
	var reported []string
	for _, p := range got {
		reported = append(reported, api.ReportedAs(p)...)
	}
	reported = append(reported, api.ProtocolTCPSYNMTU)
	if !slices.Equal(reported, api.Protocols) {
		t.Errorf("reported as %q, api.Protocols %q", reported, api.Protocols)
	}
}
