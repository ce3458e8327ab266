package hub

import (
	"fmt"
	"testing"
	"time"

	"github.com/netprober/prober/matrix"
)

func diagOf(scores map[string]float64) matrix.Diagnosis {
	d := matrix.Diagnosis{Suspects: []matrix.Suspect{}}
	for name, s := range scores {
		d.Suspects = append(d.Suspects, matrix.Suspect{Kind: matrix.KindDevice, Name: name, Score: s, EstimatedLoss: s / 10})
	}
	return d
}

// TestHistory: a suspect is tracked from when it is listed, keeps its
// score per round, gets an until when it clears, stays for an hour
// after, and goes; the history stays bounded however many come and go.
func TestHistory(t *testing.T) {
	var hs history
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	hs.record(at(0), diagOf(map[string]float64{"spine2": 0.9, "tor1": 0.05}))
	hs.record(at(20), diagOf(map[string]float64{"spine2": 0.8}))
	v := hs.view(at(20))
	if len(v.Suspects) != 1 {
		t.Fatalf("tracks %+v, want spine2 alone (tor1 was never listed)", v.Suspects)
	}
	s := v.Suspects[0]
	if !s.Listed || s.Until != nil || !s.Since.Equal(at(0)) || len(s.Scores) != 2 || s.Scores[1][1] != 0.8 {
		t.Fatalf("spine2 listed: %+v", s)
	}
	hs.record(at(40), diagOf(nil))
	hs.record(at(60), diagOf(map[string]float64{"spine1": 0.7}))
	v = hs.view(at(60))
	if len(v.Suspects) != 2 || v.Suspects[0].Name != "spine1" || v.Suspects[1].Name != "spine2" {
		t.Fatalf("order %+v, want the listed spine1 before the cleared spine2", v.Suspects)
	}
	cleared := v.Suspects[1]
	if cleared.Listed || cleared.Until == nil || !cleared.Until.Equal(at(40)) || cleared.Scores[len(cleared.Scores)-1][1] != 0 {
		t.Errorf("spine2 cleared: %+v", cleared)
	}
	// Listed again: a new since.
	hs.record(at(80), diagOf(map[string]float64{"spine2": 0.5}))
	for _, s := range hs.view(at(80)).Suspects {
		if s.Name == "spine2" && (!s.Listed || s.Until != nil || !s.Since.Equal(at(80))) {
			t.Errorf("spine2 back: %+v, want listed since %v", s, at(80))
		}
	}
	// An hour after clearing, it goes; its scores never span more than
	// an hour.
	hs.record(at(100), diagOf(map[string]float64{"spine1": 0.7}))
	later := at(100).Add(historyWindow + time.Minute)
	hs.record(later, diagOf(map[string]float64{"spine1": 0.7}))
	v = hs.view(later)
	if len(v.Suspects) != 1 || v.Suspects[0].Name != "spine1" {
		t.Errorf("an hour later: %+v, want spine1 alone", v.Suspects)
	}
	if sc := v.Suspects[0].Scores; sc[len(sc)-1][0]-sc[0][0] > historyWindow.Seconds() {
		t.Errorf("scores span %.0f s", sc[len(sc)-1][0]-sc[0][0])
	}

	// A round every second for an hour keeps at most historyPoints.
	var fast history
	for i := range 3600 {
		fast.record(at(i), diagOf(map[string]float64{"spine3": 0.6}))
	}
	if n := len(fast.view(at(3600)).Suspects[0].Scores); n > historyPoints+1 {
		t.Errorf("%d scores kept, want at most %d", n, historyPoints+1)
	}
	// A flapping fabric: many suspects come and go.
	var flap history
	for i := range 2000 {
		flap.record(at(i), diagOf(map[string]float64{fmt.Sprintf("dev%d", i): 0.5}))
	}
	if n := len(flap.view(at(2000)).Suspects); n > historySuspects {
		t.Errorf("%d suspects kept, want at most %d", n, historySuspects)
	}
}
