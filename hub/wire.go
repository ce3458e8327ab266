package hub

import "github.com/netprober/prober/api"

// The hub's answers are api's types; the aliases keep the hub's names.
type (
	matrixView   = api.MatrixView
	pull         = api.Pull
	crossing     = api.Crossing
	History      = api.History
	SuspectTrack = api.SuspectTrack
	TraceView    = api.TraceView
)
