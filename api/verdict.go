package api

// FlowSuspect is a suspect named from one source's flows to one target
// (`prober trace`): matrix.LocalizeFlows' finding, with the flows that cross it.
type FlowSuspect struct {
	Suspect
	// Through are the source ports of the flows whose path crosses the
	// suspect, and Lossy those of them that lost more than noise.
	Through []uint16 `json:"throughSourcePorts"`
	Lossy   []uint16 `json:"lossySourcePorts"`
	// Unknown are the flows that may cross it: a hop of theirs nobody
	// heard could be it.
	Unknown []uint16 `json:"unknownSourcePorts,omitempty"`
	// Sent and Lost are the end-to-end probes of the flows through it;
	// AvoidSent and AvoidLost those of the flows that avoid it.
	Sent      uint64 `json:"throughSent"`
	Lost      uint64 `json:"throughLost"`
	AvoidSent uint64 `json:"avoidSent"`
	AvoidLost uint64 `json:"avoidLost"`
}

// FlowsVerdict is what matrix.LocalizeFlows concludes.
type FlowsVerdict struct {
	Suspects []FlowSuspect `json:"suspects"`
	// Unlocated is set when flows lost packets but no element they share
	// is free of clean flows: the loss lies past Past (the last hop every
	// lossy flow answered at before the target, "" for none) on paths no
	// answering hop tells apart from the clean flows'.
	Unlocated *Unlocated `json:"unlocated,omitempty"`
}

// Unlocated says where loss is when no hop can be named.
type Unlocated struct {
	Past    string   `json:"past"`
	PastTTL int      `json:"pastTTL"`
	Lossy   []uint16 `json:"lossySourcePorts"`
	Sent    uint64   `json:"sent"`
	Lost    uint64   `json:"lost"`
	Clean   int      `json:"cleanFlows"`
}
