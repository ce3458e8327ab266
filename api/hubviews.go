package api

import "time"

// MatrixView is MatrixPath: the snapshot plus the pulls behind it.
type MatrixView struct {
	Snapshot
	IntervalSeconds float64 `json:"intervalSeconds"`
	Pulls           []Pull  `json:"pulls"`
	// Focus is the view the page opens on: where the trouble is.
	Focus *Focus `json:"focus,omitempty"`
}

// Pull is the outcome of the latest pull of one agent.
type Pull struct {
	URL   string `json:"url"`
	Agent string `json:"agent,omitempty"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Reason is the pull-error metric's label, not on the wire.
	Reason string    `json:"-"`
	At     time.Time `json:"at"`
}

// History is HistoryPath: every suspect listed within the last hour.
type History struct {
	WindowSeconds float64        `json:"windowSeconds"`
	Suspects      []SuspectTrack `json:"suspects"`
}

// SuspectTrack is one suspect's last hour: since when it is listed, until
// when (nil while it is), and its score per round.
type SuspectTrack struct {
	Kind          string     `json:"kind"`
	Name          string     `json:"name"`
	Family        string     `json:"family,omitempty"`
	Listed        bool       `json:"listed"`
	Since         time.Time  `json:"since"`
	Until         *time.Time `json:"until"`
	EstimatedLoss float64    `json:"estimatedLoss"`
	Detail        string     `json:"detail"`
	// Scores are [unix seconds, score] pairs, oldest first; 0 after it
	// cleared.
	Scores [][2]float64 `json:"scores"`
}

// Crossing is the answer of FabricCellsPath.
type Crossing struct {
	Device string    `json:"device"`
	Cells  []CellRef `json:"cells"`
}

// TraceView is the matrix's answer of TracePath: the pair traced and the
// report, as `prober trace --json` prints it.
type TraceView struct {
	// Pair is the pair traced, with its probes in the matrix's window.
	Pair
	Report TraceReport `json:"report"`
}
