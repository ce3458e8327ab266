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

// TestProbed: icmp never goes to an lb target, everything else goes
// everywhere.
func TestProbed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		class string
		proto string
		want  bool
	}{
		{ClassLB, ProtocolICMP, false},
		{ClassLB, ProtocolTCPSYN, true},
		{ClassLB, ProtocolHTTP2Ping, true},
		{ClassNode, ProtocolICMP, true},
		{ClassPod, ProtocolICMP, true},
		{ClassPod, ProtocolHTTP2Ping, true},
	} {
		if got := Probed(tc.class, tc.proto); got != tc.want {
			t.Errorf("Probed(%s, %s) = %v, want %v", tc.class, tc.proto, got, tc.want)
		}
	}
}
