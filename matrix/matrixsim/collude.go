package matrixsim

import (
	"slices"

	"github.com/netprober/prober/api"
)

// Collude makes the named agents lose ratio of every flow pick chooses,
// as agents that replay their real paths and claim loss on some alone
// would, to frame what those flows cross.
func Collude(obs []api.Observations, ratio float64, pick func(api.Target, api.Flow) bool, liars ...string) {
	for i := range obs {
		if !slices.Contains(liars, obs[i].Agent.Name) {
			continue
		}
		for ti := range obs[i].Targets {
			t := &obs[i].Targets[ti]
			for pi := range t.Protocols {
				p := &t.Protocols[pi]
				var sent, lost uint64
				for fi := range p.Flows {
					f := &p.Flows[fi]
					if pick(*t, *f) {
						f.Lost = uint64(float64(f.Sent) * ratio)
						f.LossRatio = float64(f.Lost) / float64(max(f.Sent, 1))
					}
					sent, lost = sent+f.Sent, lost+f.Lost
				}
				if len(p.Flows) > 0 {
					p.Sent, p.Lost, p.LossRatio = sent, lost, float64(lost)/float64(max(sent, 1))
				}
			}
		}
	}
}

// Through picks the flows whose traced path crosses device dev.
func Through(hops map[string]string, dev string) func(api.Target, api.Flow) bool {
	return func(_ api.Target, f api.Flow) bool {
		return f.Path != nil && slices.ContainsFunc(f.Path.Hops, func(h string) bool { return hops[h] == dev })
	}
}

// OutOf picks a third of the flows to targets outside rack, as liars on a
// silent fabric would, who see no spine to pick by.
func OutOf(rack string) func(api.Target, api.Flow) bool {
	return func(t api.Target, f api.Flow) bool { return t.Labels["rack"] != rack && f.SourcePort%3 == 1 }
}
