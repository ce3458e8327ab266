package matrix

import "slices"

// coverPick is one step of coverFlows: the elements that explain the
// same uncovered failed flows (ties, the first the step's best), and
// those flows, by index.
type coverPick struct {
	elems []int32
	flows []int
}

// coverFlows is the greedy cover the stages that judge a flow whole
// share (a black-holed size, an added delay): each step takes the
// element the most uncovered failed flows cross and no good flow does
// (cleared), with the elements those same flows cross alike as ties,
// while accept takes it; at most max steps. A fault on one element
// fails every flow across it, and one good flow across an element
// clears it whatever else it has. accept sees the step's flows and how
// many failed flows were still uncovered before it; a step with fewer
// than two flows is never taken: one flow alone does not place a fault.
func coverFlows(failed [][]int32, cleared func(int32) bool, max int, accept func(flows []int, uncovered int) bool) []coverPick {
	var out []coverPick
	covered := make([]bool, len(failed))
	uncovered := len(failed)
	for range max {
		crossed := map[int32][]int{} // element -> the uncovered failed flows across it
		for i, es := range failed {
			if covered[i] {
				continue
			}
			for _, e := range es {
				if !cleared(e) {
					crossed[e] = append(crossed[e], i)
				}
			}
		}
		best := int32(-1)
		for e, fs := range crossed {
			if best < 0 || len(fs) > len(crossed[best]) || len(fs) == len(crossed[best]) && e < best {
				best = e
			}
		}
		if best < 0 || len(crossed[best]) < 2 || !accept(crossed[best], uncovered) {
			break
		}
		pick := coverPick{elems: []int32{best}, flows: crossed[best]}
		var ties []int32
		for e, fs := range crossed {
			if e != best && slices.Equal(fs, pick.flows) {
				ties = append(ties, e)
			}
		}
		slices.Sort(ties)
		pick.elems = append(pick.elems, ties...)
		for _, i := range pick.flows {
			covered[i] = true
		}
		uncovered -= len(pick.flows)
		out = append(out, pick)
	}
	return out
}
