package api

// TraceReport is what `prober trace` prints (package tracereport builds
// it): flows grouped by path, and the hops where a lossy flow's break
// starts. Its JSON is `prober trace --json`'s and the trace view's.
type TraceReport struct {
	Host         string `json:"host"`
	Target       string `json:"target"`
	Port         uint16 `json:"port"`
	Source       string `json:"source"`
	Flows        int    `json:"flowCount"`
	ProbesPerHop int    `json:"probesPerHop"`
	// ProbeSize is the IP packet size of padded probes (prober trace
	// --size); 0: bare SYNs.
	ProbeSize       int                  `json:"probeSize,omitempty"`
	DurationSeconds float64              `json:"durationSeconds"`
	Paths           []TraceReportPath    `json:"paths"`
	Suspects        []TraceReportSuspect `json:"suspects"`
	// Inferred are what the matrix's localization names from the flows
	// alone: what lossy flows cross and clean flows avoid. It needs no
	// hop to answer past the first, so it stands where rate-limited hops
	// leave no break to read (docs/trace.md).
	Inferred  []FlowSuspect     `json:"inferredSuspects"`
	Unlocated *Unlocated        `json:"unlocated,omitempty"`
	FlowList  []TraceReportFlow `json:"flows"`
	Unmatched map[string]uint64 `json:"unmatched,omitempty"`
	// WindowProbes are the probes of the agent's window the inference
	// added to the trace's own.
	WindowProbes uint64 `json:"windowProbes,omitempty"`
}

// TraceReportPath is the flows that took one path, and their hops'
// answers summed.
type TraceReportPath struct {
	Hash        string           `json:"hash"`
	SourcePorts []uint16         `json:"sourcePorts"`
	Hops        []TraceReportHop `json:"hops"`
	Reached     bool             `json:"reached"`
	Sent        int              `json:"sent"` // end to end, all its flows
	Received    int              `json:"received"`
	Loss        float64          `json:"loss"`
	LossyPorts  []uint16         `json:"lossySourcePorts,omitempty"`
	// SuspectHop indexes Hops: where the lossy flows' break starts.
	SuspectHop int `json:"suspectHop"`
}

// TraceReportFlow is one flow's own path and reading.
type TraceReportFlow struct {
	SourcePort uint16   `json:"sourcePort"`
	Hops       []string `json:"hops"`
	Reached    bool     `json:"reached"`
	Sent       int      `json:"sent"`
	Received   int      `json:"received"`
	Lossy      bool     `json:"lossy"`
	SuspectHop int      `json:"suspectHop"`
	// InferredTTLs are the hops no probe heard, filled from the other
	// flows of the trace (docs/trace.md).
	InferredTTLs []int `json:"inferredTTLs,omitempty"`
}

// TraceReportHop is one TTL of a path.
type TraceReportHop struct {
	TTL     int    `json:"ttl"`
	Address string `json:"address"` // "" when silent
	// Name is the device the matrix's hops config names the address
	// by, so the page and the matrix's suspects speak of one device.
	Name       string  `json:"name,omitempty"`
	Sent       int     `json:"sent"`
	Received   int     `json:"received"`
	Loss       float64 `json:"loss"`
	RTTSeconds float64 `json:"rttSeconds"`
	Suspect    bool    `json:"suspect,omitempty"`
	// Inferred counts the flows whose hop here was inferred, not heard.
	Inferred int `json:"inferred,omitempty"`
}

// TraceReportSuspect is one hop address where lossy flows' breaks start, with the
// evidence: how that hop answered, and how the destination answered.
type TraceReportSuspect struct {
	Address     string   `json:"address"`
	Name        string   `json:"name,omitempty"` // as Hop's
	SourcePorts []uint16 `json:"sourcePorts"`
	HopSent     int      `json:"hopSent"`
	HopReceived int      `json:"hopReceived"`
	HopLoss     float64  `json:"hopLoss"`
	EndSent     int      `json:"endToEndSent"`
	EndReceived int      `json:"endToEndReceived"`
	EndLoss     float64  `json:"endToEndLoss"`
}
