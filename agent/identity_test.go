package agent

import (
	"net/netip"
	"strings"
	"testing"
)

func TestIdentityFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NODE_NAME": "n1", "POD_NAME": "prober-pod-x", "POD_IP": "198.51.100.4"}
	id, err := IdentityFromEnv(func(k string) string { return env[k] })
	if err != nil || id.NodeName != "n1" || id.PodName != "prober-pod-x" || id.PodIP != netip.MustParseAddr("198.51.100.4") {
		t.Errorf("IdentityFromEnv = %+v, %v", id, err)
	}
	_, err = IdentityFromEnv(func(k string) string { return map[string]string{"POD_IP": "nope"}[k] })
	for _, w := range []string{"NODE_NAME", "POD_NAME", `POD_IP "nope"`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not name %s", err, w)
		}
	}
}
