package hub

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/netprober/prober/api"
)

// BenchmarkSetPeers10000 is one discovery snapshot at 10,000 nodes, each
// with a node and a pod agent, all of them pulled before: the time the
// hub's lock is held from long-polls and rounds.
func BenchmarkSetPeers10000(b *testing.B) {
	h := newTestHub(b, []string{"http://192.0.2.200:9808"}, "node")
	ps := scalePeers(10000)
	agents := agentsOf(ps)
	h.SetPeers(ps, agents)
	for _, u := range agents {
		h.pulls[u] = &pull{URL: u}
	}
	b.ReportAllocs()
	for b.Loop() {
		h.SetPeers(ps, agents)
	}
}

// BenchmarkServeWholePlan5000 is one request for the whole plan at 5,000
// nodes (a node and a pod agent each): once encoded for the build, a copy
// to the socket (each request encoded it afresh before: issue 30).
func BenchmarkServeWholePlan5000(b *testing.B) {
	h := newTestHub(b, []string{"http://192.0.2.200:9808"}, "node")
	ps := scalePeers(5000)
	h.SetPeers(ps, agentsOf(ps))
	req := httptest.NewRequest("GET", api.PlanPath, nil)
	w := httptest.NewRecorder()
	h.servePlan(w, req)
	b.SetBytes(int64(w.Body.Len()))
	b.ReportAllocs()
	for b.Loop() {
		h.servePlan(discard{}, req)
	}
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// scalePeers is n nodes, each with a node and a pod agent.
func scalePeers(n int) []api.Peer {
	var ps []api.Peer
	for i := range n {
		node := fmt.Sprintf("n%05d", i)
		ps = append(ps,
			api.Peer{Name: node, Class: api.ClassNode, Address: fmt.Sprintf("198.18.%d.%d", i/256, i%256), Port: 9808},
			api.Peer{Name: "pod-" + node, Class: api.ClassPod, Node: node, Address: fmt.Sprintf("198.19.%d.%d", i/256, i%256), Port: 9808})
	}
	return ps
}
