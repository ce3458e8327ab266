package api

import "testing"

func TestPathClass(t *testing.T) {
	for _, c := range []struct{ from, to, want string }{
		{ClassNode, ClassNode, PathNodeToNode}, {ClassNode, ClassPod, PathNodeToPod}, {ClassPod, ClassNode, PathPodToNode},
		{ClassPod, ClassPod, PathPodToPod}, {ClassNode, ClassLB, PathNodeToLB}, {ClassPod, ClassLB, PathPodToLB},
		{ClassLB, ClassNode, ""}, {ClassNode, "switch", ""}, {"", ClassNode, ""},
	} {
		if got := PathClass(c.from, c.to); got != c.want {
			t.Errorf("PathClass(%q, %q) = %q, want %q", c.from, c.to, got, c.want)
		}
	}
}
