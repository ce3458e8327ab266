package api

import "testing"

// TestTiedWith: a suspect is tied with the refs its evidence lists, and
// with no other (another kind of the same name included).
func TestTiedWith(t *testing.T) {
	s := Suspect{Kind: "pmtu", Name: "tor1->spine2", Evidence: Evidence{Ties: []Ref{{Kind: "pmtu", Name: "spine2->tor2"}}}}
	if !s.TiedWith(Ref{Kind: "pmtu", Name: "spine2->tor2"}) {
		t.Error("not tied with the ref its evidence lists")
	}
	for _, r := range []Ref{{Kind: "link", Name: "spine2->tor2"}, {Kind: "pmtu", Name: "tor1->spine2"}, {}} {
		if s.TiedWith(r) {
			t.Errorf("tied with %+v", r)
		}
	}
}
