package matrix

import (
	"fmt"
	"math"
	"slices"

	"github.com/netprober/prober/api"
)

// checkReport refuses a report beyond api's bounds on counts and lengths,
// naming the first field found, before anything of it is stored. Field
// paths are formatted only on failure: Observe allocates nothing in
// steady state.
func checkReport(obs *api.Observations) error {
	ag := &obs.Agent
	if err := longest(ag.Name, ag.Class, ag.Address, ag.Version, ag.FirstHop); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := checkLabels(ag.Labels); err != nil {
		return fmt.Errorf("agent.labels: %w", err)
	}
	if n := len(ag.Addresses); n > len(api.Families) {
		return fmt.Errorf("agent.addresses: %d, at most one per family (%d)", n, len(api.Families))
	}
	if err := longest(ag.Addresses...); err != nil {
		return fmt.Errorf("agent.addresses: %w", err)
	}
	if n := len(ag.HostAddresses); n > api.MaxHostAddresses {
		return fmt.Errorf("agent.hostAddresses: %d, at most %d", n, api.MaxHostAddresses)
	}
	if err := longest(ag.HostAddresses...); err != nil {
		return fmt.Errorf("agent.hostAddresses: %w", err)
	}
	if ag.Class != api.ClassNode && ag.Class != api.ClassPod {
		return fmt.Errorf("agent.class: %.64q is neither %s nor %s", ag.Class, api.ClassNode, api.ClassPod)
	}
	if n := len(obs.Targets); n > api.MaxReportTargets {
		return fmt.Errorf("targets: %d, at most %d", n, api.MaxReportTargets)
	}
	hops := 0
	for i := range obs.Targets {
		if err := checkTarget(ag.Class, &obs.Targets[i], &hops); err != nil {
			return fmt.Errorf("targets[%d]%w", i, err)
		}
	}
	return nil
}

// checkTarget's errors start with the field below the target: ".labels: ...".
// hops counts the report's traced hops so far.
func checkTarget(class string, t *api.Target, hops *int) error {
	if err := longest(t.Name, t.Address, t.Class, t.Path); err != nil {
		return fmt.Errorf(": %w", err)
	}
	if err := checkLabels(t.Labels); err != nil {
		return fmt.Errorf(".labels: %w", err)
	}
	if err := longest(t.Backends...); err != nil {
		return fmt.Errorf(".backends: %w", err)
	}
	// The family becomes a label value, as the protocol does.
	if t.Family != "" && !slices.Contains(api.Families, t.Family) {
		return fmt.Errorf(".family: %.64q is not one of %v", t.Family, api.Families)
	}
	if want := api.PathClass(class, t.Class); want == "" || t.Path != want {
		return fmt.Errorf(": class %.64q and path %.64q do not fit an agent of class %s", t.Class, t.Path, class)
	}
	// A protocol becomes a label value: an unknown one is refused, not
	// exported.
	if n := len(t.Protocols); n > len(api.Protocols) {
		return fmt.Errorf(".protocols: %d, at most %d", n, len(api.Protocols))
	}
	for j := range t.Protocols {
		p := &t.Protocols[j]
		if !slices.Contains(api.Protocols, p.Protocol) {
			return fmt.Errorf(".protocols[%d].protocol: %.64q is not one of %v", j, p.Protocol, api.Protocols)
		}
		if err := longest(p.LastResult); err != nil {
			return fmt.Errorf(".protocols[%d].lastResult: %w", j, err)
		}
		if n := len(p.Flows); n > api.MaxFlows {
			return fmt.Errorf(".protocols[%d].flows: %d, at most %d", j, n, api.MaxFlows)
		}
		for k := range p.Flows {
			fl := &p.Flows[k]
			if err := longest(fl.LastResult); err != nil {
				return fmt.Errorf(".protocols[%d].flows[%d].lastResult: %w", j, k, err)
			}
			if fl.Path == nil {
				continue
			}
			if err := longest(fl.Path.Hash); err != nil {
				return fmt.Errorf(".protocols[%d].flows[%d].path.hash: %w", j, k, err)
			}
			if *hops += min(len(fl.Path.Hops), api.MaxHops); *hops > api.MaxReportHops {
				return fmt.Errorf(".protocols[%d].flows[%d].path: the report's traced hops exceed %d", j, k, api.MaxReportHops)
			}
			for h, hop := range fl.Path.Hops {
				if len(hop) > maxHopLen {
					return fmt.Errorf(".protocols[%d].flows[%d].path.hops[%d]: %d bytes, an address is at most %d", j, k, h, len(hop), maxHopLen)
				}
			}
		}
	}
	return nil
}

// maxHopLen is the longest textual IP address (hops carry no zone).
const maxHopLen = 45

// longest refuses a string longer than api.MaxString.
func longest(ss ...string) error {
	for _, s := range ss {
		if len(s) > api.MaxString {
			return fmt.Errorf("a string of %d bytes, at most %d", len(s), api.MaxString)
		}
	}
	return nil
}

func checkLabels(l map[string]string) error {
	if len(l) > api.MaxLabels {
		return fmt.Errorf("%d, at most %d", len(l), api.MaxLabels)
	}
	for k, v := range l {
		if err := longest(k, v); err != nil {
			return err
		}
	}
	return nil
}

// clampCount bounds a count an agent reports (api.MaxCount).
func clampCount(n uint64) uint64 { return min(n, api.MaxCount) }

// clampSeconds makes a reported duration finite and in [0, MaxSeconds]:
// NaN and negatives are 0, so one report's +Inf or 1e308 can neither
// overflow a sum nor make the matrix's JSON unencodable.
func clampSeconds(s float64) float64 {
	if math.IsNaN(s) || s < 0 {
		return 0
	}
	return min(s, api.MaxSeconds)
}
