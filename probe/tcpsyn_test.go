package probe

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// TestStaleRSTs: which sequence numbers a flow's next probe resets
// before its SYN, after what its earlier probes met and how long ago.
func TestStaleRSTs(t *testing.T) {
	t.Parallel()
	dst, other := netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("192.0.2.8")
	t0 := time.Unix(1000, 0)
	synAck := synAnswer{outcome: OK, at: t0}
	type step struct {
		seq  uint32
		a    synAnswer
		lost bool
	}
	cases := []struct {
		name  string
		steps []step
		to    netip.Addr
		after time.Duration // since t0
		want  string
	}{
		{"answered, probed again within a second", []step{{seq: 10, a: synAck}}, dst, time.Second, "[10]"},
		{"answered, probed again 8 s later", []step{{seq: 10, a: synAck}}, dst, 8 * time.Second, "[]"},
		{"answered, just before the retransmissions end", []step{{seq: 10, a: synAck}}, dst, staleAnswerFor - time.Millisecond, "[10]"},
		{"lost, probed again 8 s later", []step{{seq: 10, lost: true}}, dst, 8 * time.Second, "[10]"},
		{"answered then lost, 8 s later", []step{{seq: 10, a: synAck}, {seq: 11, lost: true}}, dst, 8 * time.Second, "[10 11]"},
		{"lost then answered, 8 s later", []step{{seq: 10, lost: true}, {seq: 11, a: synAck}}, dst, 8 * time.Second, "[]"},
		{"out-of-window ACK, 8 s later", []step{{seq: 10, a: synAnswer{outcome: OK, at: t0, staleAck: 6}}}, dst, 8 * time.Second, "[5]"},
		{"refused", []step{{seq: 10, lost: true}, {seq: 11, a: synAnswer{outcome: Refused, at: t0}}}, dst, time.Second, "[]"},
		{"another target", []step{{seq: 10, lost: true}}, other, time.Second, "[]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s synSlot
			s.lastDst, s.lastDport = dst, 80
			for _, st := range tc.steps {
				s.settle(st.seq, st.a, st.lost)
			}
			stale, n := s.staleRSTs(tc.to, 80, t0.Add(tc.after))
			if got := fmt.Sprint(stale[:n]); got != tc.want {
				t.Errorf("RSTs for %v, want %v", got, tc.want)
			}
		})
	}
}
