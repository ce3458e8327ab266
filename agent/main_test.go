package agent

import (
	"testing"

	"github.com/netprober/prober/probe/probetest"
)

// TestMain runs the tests, as root, in a network namespace of their own.
func TestMain(m *testing.M) { probetest.Main(m) }
