package hub

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/netprober/prober/matrix"
)

// Bounds of the suspects' history the page draws.
const (
	// historyWindow is how long a cleared suspect stays in the history,
	// and how far back its scores go.
	historyWindow = time.Hour
	// historyPoints bounds the scores kept per suspect: one per
	// historyWindow/historyPoints at most, whatever the interval.
	historyPoints = 360
	// historySuspects bounds the suspects kept: a flapping fabric must
	// not grow the hub's memory; the longest cleared go first.
	historySuspects = 256
)

// history keeps the suspects' tracks across rounds. Guarded by Hub.mu.
type history struct {
	tracks map[string]*SuspectTrack
}

// record adds one round's listed suspects at now.
func (hs *history) record(now time.Time, d matrix.Diagnosis) {
	if hs.tracks == nil {
		hs.tracks = map[string]*SuspectTrack{}
	}
	seen := map[string]bool{}
	for _, s := range d.Listed() {
		key := s.Kind + "/" + s.Name + "/" + s.Family
		seen[key] = true
		t := hs.tracks[key]
		if t == nil || !t.Listed {
			if t == nil {
				t = &SuspectTrack{Kind: s.Kind, Name: s.Name, Family: s.Family}
				hs.tracks[key] = t
			}
			t.Listed, t.Since, t.Until = true, cmp.Or(s.Since, now), nil
		}
		t.EstimatedLoss, t.Detail = s.EstimatedLoss, s.Evidence.Detail
		addScore(t, now, s.Score)
	}
	for key, t := range hs.tracks {
		if seen[key] {
			continue
		}
		if t.Listed {
			until := now
			t.Listed, t.Until = false, &until
		}
		addScore(t, now, 0)
		if now.Sub(*t.Until) > historyWindow {
			delete(hs.tracks, key)
		}
	}
	if over := len(hs.tracks) - historySuspects; over > 0 {
		for _, t := range hs.view(now).Suspects[historySuspects:] {
			delete(hs.tracks, t.Kind+"/"+t.Name+"/"+t.Family)
		}
	}
}

// addScore appends a score at now to t, at most historyPoints an hour, and drops
// the scores older than the window.
func addScore(t *SuspectTrack, now time.Time, score float64) {
	sec := float64(now.UnixNano()) / 1e9
	step := historyWindow.Seconds() / historyPoints
	if n := len(t.Scores); n > 0 && sec-t.Scores[n-1][0] < step {
		t.Scores[n-1][1] = max(t.Scores[n-1][1], score)
	} else {
		t.Scores = append(t.Scores, [2]float64{sec, score})
	}
	cut := sec - historyWindow.Seconds()
	i := 0
	for i < len(t.Scores) && t.Scores[i][0] < cut {
		i++
	}
	t.Scores = t.Scores[i:]
}

// view is the history, listed suspects first (highest score), then the
// cleared ones, latest first.
func (hs *history) view(now time.Time) History {
	v := History{WindowSeconds: historyWindow.Seconds(), Suspects: []SuspectTrack{}}
	for _, t := range hs.tracks {
		c := *t
		c.Scores = slices.Clone(t.Scores)
		v.Suspects = append(v.Suspects, c)
	}
	last := func(t SuspectTrack) float64 {
		if len(t.Scores) == 0 {
			return 0
		}
		return t.Scores[len(t.Scores)-1][1]
	}
	slices.SortFunc(v.Suspects, func(x, y SuspectTrack) int {
		if x.Listed != y.Listed {
			if x.Listed {
				return -1
			}
			return 1
		}
		if x.Listed {
			if c := cmp.Compare(last(y), last(x)); c != 0 {
				return c
			}
		} else if c := y.Until.Compare(*x.Until); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(x.Kind, y.Kind), strings.Compare(x.Name, y.Name), strings.Compare(x.Family, y.Family))
	})
	return v
}
