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
// while accept takes it; at most steps steps. A fault on one element
// fails every flow across it, and one good flow across an element
// clears it whatever else it has. accept sees the step's flows and how
// many failed flows were still uncovered before it; a step with fewer
// than two flows is never taken: one flow alone does not place a fault.
func coverFlows(failed [][]int32, cleared func(int32) bool, steps int, accept func(flows []int, uncovered int) bool) []coverPick {
	// Elements are counted in a slice, not a map of flow lists: a delaying
	// spine at 5,000 nodes fails 750 k flows, and the map cost 200 MB a
	// round. A step's flows are gathered for its best element alone.
	top := int32(-1)
	for _, es := range failed {
		for _, e := range es {
			top = max(top, e)
		}
	}
	open := make([]bool, top+1) // not cleared
	for e := range open {
		open[e] = !cleared(int32(e))
	}
	count := make([]int32, top+1)
	last := make([]int32, top+1) // the flow that counted it last, plus one
	covered := make([]bool, len(failed))
	uncovered := len(failed)
	var out []coverPick
	for range steps {
		clear(count)
		clear(last)
		for i, es := range failed {
			if covered[i] {
				continue
			}
			for _, e := range es {
				if open[e] && last[e] != int32(i)+1 {
					last[e] = int32(i) + 1
					count[e]++
				}
			}
		}
		best := -1
		for e, n := range count {
			if n > 0 && (best < 0 || n > count[best]) {
				best = e
			}
		}
		if best < 0 || count[best] < 2 {
			break
		}
		flows := make([]int, 0, count[best])
		for i, es := range failed {
			if !covered[i] && slices.Contains(es, int32(best)) {
				flows = append(flows, i)
			}
		}
		if !accept(flows, uncovered) {
			break
		}
		// Ties: the elements every one of these flows crosses, and no
		// other uncovered one (as many as the best).
		pick := coverPick{elems: []int32{int32(best)}, flows: flows}
		for e, n := range count {
			if e != best && n == count[best] && allCross(failed, flows, int32(e)) {
				pick.elems = append(pick.elems, int32(e))
			}
		}
		for _, i := range flows {
			covered[i] = true
		}
		uncovered -= len(flows)
		out = append(out, pick)
	}
	return out
}

// allCross reports whether every flow of flows crosses element e.
func allCross(failed [][]int32, flows []int, e int32) bool {
	for _, i := range flows {
		if !slices.Contains(failed[i], e) {
			return false
		}
	}
	return true
}
