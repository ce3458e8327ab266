package hub

import (
	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
)

// focusOf is the page's first view: the path class, protocol and family of the top listed
// suspect's example flows (traced flows are tcp_syn), else of the worst
// group cell; nil when no cell has data.
func focusOf(s matrix.Snapshot, d matrix.Diagnosis) *api.Focus {
	for _, sp := range d.Listed() {
		for _, ex := range sp.Evidence.Examples {
			if ex.Path == "" {
				continue
			}
			proto := ex.Protocol
			if proto == "" {
				proto = worstProtocol(s, ex.Path, ex.Family)
			}
			return &api.Focus{Path: ex.Path, Protocol: proto, Family: ex.Family,
				Why: "the evidence of the top suspect, " + sp.Kind + " " + sp.Name}
		}
	}
	var worst *matrix.Cell
	for i := range s.Groups {
		c := &s.Groups[i]
		if c.Sent == 0 {
			continue
		}
		if worst == nil || c.LossRatio > worst.LossRatio || c.LossRatio == worst.LossRatio && c.Lost > worst.Lost {
			worst = c
		}
	}
	if worst == nil {
		return nil
	}
	why := "the worst cell, " + worst.Source + " to " + worst.Target
	if worst.Lost == 0 {
		why = "no cell loses"
	}
	return &api.Focus{Path: worst.Path, Protocol: worst.Protocol, Family: worst.Family, Why: why}
}

// worstProtocol is the protocol of the lossiest group cell of path and
// family: a rule's example is a pair, over every protocol.
func worstProtocol(s matrix.Snapshot, path, family string) string {
	best, ratio := api.ProtocolTCPSYN, -1.0
	for _, c := range s.Groups {
		if c.Path == path && c.Family == family && c.Sent > 0 && c.LossRatio > ratio {
			best, ratio = c.Protocol, c.LossRatio
		}
	}
	return best
}
