package matrix

import "github.com/netprober/prober/api"

// The wire types the matrix returns are api's, which owns every type an
// endpoint serves; the aliases keep the matrix's callers' names.
type (
	Diagnosis    = api.Diagnosis
	Suspect      = api.Suspect
	Evidence     = api.Evidence
	Ref          = api.Ref
	FlowRef      = api.FlowRef
	Snapshot     = api.Snapshot
	AgentStatus  = api.AgentStatus
	Cell         = api.Cell
	Fabric       = api.Fabric
	FabricDevice = api.FabricDevice
	FabricLink   = api.FabricLink
	CellRef      = api.CellRef
	Pair         = api.Pair
	PairFlow     = api.PairFlow
	Focus        = api.Focus
	FlowSuspect  = api.FlowSuspect
	FlowsVerdict = api.FlowsVerdict
	Unlocated    = api.Unlocated
	Dispute      = api.Dispute
)

// The suspect kinds, agent states and fabric roles, api's.
const (
	KindDevice    = api.KindDevice
	KindLink      = api.KindLink
	KindLB        = api.KindLB
	KindHost      = api.KindHost
	KindTier      = api.KindTier
	KindDataplane = api.KindDataplane
	KindPMTU      = api.KindPMTU
	KindLatency   = api.KindLatency

	StateFresh = api.StateFresh
	StateStale = api.StateStale

	RoleHost  = api.RoleHost
	RolePod   = api.RolePod
	RoleToR   = api.RoleToR
	RoleSpine = api.RoleSpine
	RoleLB    = api.RoleLB

	ListScore = api.ListScore
)
