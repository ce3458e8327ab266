package probe

import "sync/atomic"

// Unmatched counts received packets that answered no probe in flight, and
// receive errors. They are dropped; the counts are exported as
// prober_replies_unmatched_total{reason} and prober_receive_errors_total.
type Unmatched struct {
	Late       atomic.Uint64 // for a probe that timed out or an earlier probe
	Duplicate  atomic.Uint64 // a second answer to the same probe
	Foreign    atomic.Uint64 // not for any probe of ours
	Malformed  atomic.Uint64 // could not be parsed
	RecvErrors atomic.Uint64
}

// UnmatchedCounts is a snapshot of Unmatched by reason.
func (u *Unmatched) UnmatchedCounts() map[string]uint64 {
	return map[string]uint64{
		"late":      u.Late.Load(),
		"duplicate": u.Duplicate.Load(),
		"foreign":   u.Foreign.Load(),
		"malformed": u.Malformed.Load(),
	}
}
