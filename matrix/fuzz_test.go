package matrix

import (
	"encoding/json"

	"github.com/netprober/prober/api"
	"testing"
)

// FuzzObserve feeds arbitrary JSON, decoded as observations, through
// Observe, Snapshot and Localize: nothing may panic, and Localize must
// return a non-nil suspect list.
func FuzzObserve(f *testing.F) {
	for _, seed := range []string{
		`{"schemaVersion":1,"agent":{"name":"a1","address":"192.0.2.11"},"targets":[{"name":"b1","address":"198.51.100.11","path":"node_to_node","protocols":[{"protocol":"tcp_syn","sent":10,"lost":3,"flows":[{"sourcePort":1,"sent":10,"lost":3,"path":{"hops":["192.0.2.1","","203.0.113.11","198.51.100.11"],"suspectHop":1}}]}]}]}`,
		`{"agent":{"name":"x"},"targets":[{"class":"lb","path":"node_to_lb","address":"203.0.113.201","establishedFlowBlackhole":true,"backends":["b1"],"protocols":[{"protocol":"http2_ping","sent":5,"lost":9}]}]}`,
		`{"agent":{"name":"p","class":"pod","labels":{"node":"n1"}},"targets":[{"name":"q","class":"pod","path":"pod_to_pod","labels":{"node":"n2"},"protocols":[{"protocol":"tcp_syn","sent":18446744073709551615,"lost":18446744073709551615,"flows":[{"sent":1,"lost":2,"path":{"hops":["not an ip","::1","::1","a1"],"suspectHop":99}}]}]}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var obs []json.RawMessage
		if json.Unmarshal(data, &obs) != nil {
			obs = []json.RawMessage{data}
		}
		m, err := New(Config{GroupBy: "rack", Hops: testHops, Cells: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range obs {
			var o struct{ Observations api.Observations }
			if json.Unmarshal(raw, &o.Observations) != nil {
				continue
			}
			_ = m.Observe(t0, o.Observations)
		}
		_ = m.Snapshot(t0)
		if d := m.Localize(t0); d.Suspects == nil {
			t.Fatal("Localize returned nil suspects")
		}
	})
}
