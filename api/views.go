package api

import "time"

// Fabric is the topology the matrix learned from the traced paths of the
// latest matrix.Localize: what the page draws (FabricPath).
type Fabric struct {
	Time    time.Time      `json:"time"`
	Devices []FabricDevice `json:"devices"`
	Links   []FabricLink   `json:"links"`
}

// The roles of a FabricDevice.
const (
	RoleHost  = "host"  // a node
	RolePod   = "pod"   // a pod, behind its node
	RoleToR   = "tor"   // a switch some host hangs off
	RoleSpine = "spine" // any switch above the ToRs
	RoleLB    = "lb"    // a VIP or load balancer target
)

// FabricDevice is one device of the Fabric.
type FabricDevice struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Tier is 0 for hosts and pods, 1 for ToRs, one more per switch
	// above, and the top for LBs.
	Tier int `json:"tier"`
	// Parent is a node's ToR or a pod's node, when traced.
	Parent string `json:"parent,omitempty"`
	// Group is a host's or pod's matrix group: its rows and columns.
	Group     string   `json:"group,omitempty"`
	Addresses []string `json:"addresses,omitempty"`
	// EstimatedLoss is a suspect's own estimated loss, else the lower
	// median of its links' estimated losses.
	EstimatedLoss float64 `json:"estimatedLoss"`
	// Suspect is the kind of the listed suspect of this name, if any.
	Suspect string `json:"suspect,omitempty"`
}

// FabricLink is one direction of one link between traced devices.
type FabricLink struct {
	From          string  `json:"from"`
	To            string  `json:"to"`
	EstimatedLoss float64 `json:"estimatedLoss"`
	// Flows are the traced flows whose forward path crosses it.
	Flows   int  `json:"flows"`
	Suspect bool `json:"suspect,omitempty"`
}

// CellRef is one matrix cell (groups, path class, family) whose traced
// flows cross a device.
type CellRef struct {
	Source     string `json:"source"`
	Target     string `json:"target"`
	Path       string `json:"path"`
	Family     string `json:"family"`
	Flows      int    `json:"flows"`
	LossyFlows int    `json:"lossyFlows"`
}

// Pair is one (agent, target) pair of a cell.
type Pair struct {
	Agent   string `json:"agent"`
	Target  string `json:"target"`
	Address string `json:"address"`
	Path    string `json:"path"`
	Family  string `json:"family"`
	Sent    uint64 `json:"sent"`
	Lost    uint64 `json:"lost"`
	// Flows are its tcp_syn flows by source port, as the matrix holds
	// them: what a trace of the pair adds to its own few probes.
	Flows map[uint16]PairFlow `json:"-"`
}

// PairFlow is what the matrix holds of one flow: its probes in the window
// and the path its agent's traces found ("" for a hop never heard).
type PairFlow struct {
	Stats Stats
	Hops  []string
}

// Focus is the view a page opens on: where the trouble is.
type Focus struct {
	Path     string `json:"path"`
	Protocol string `json:"protocol"`
	Family   string `json:"family"`
	Why      string `json:"why"`
}
