package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/api"
)

// clusterPeers is 3 racks of 4 nodes, a pod agent on each, and the API
// server's VIP. RFC 5737 addresses: nothing is dialled.
func clusterPeers() []api.Peer {
	var ps []api.Peer
	for r := 1; r <= 3; r++ {
		for n := 1; n <= 4; n++ {
			node := fmt.Sprintf("n%d%d", r, n)
			ps = append(ps,
				api.Peer{Name: node, Class: api.ClassNode, Address: fmt.Sprintf("192.0.2.%d", 10*r+n), Port: 9808,
					Labels: map[string]string{"node": node, "rack": fmt.Sprint("r", r)}},
				api.Peer{Name: "pod-" + node, Class: api.ClassPod, Node: node, Address: fmt.Sprintf("198.51.100.%d", 10*r+n), Port: 9808,
					Labels: map[string]string{"node": node, "rack": fmt.Sprint("r", r)}})
		}
	}
	return append(ps, api.Peer{Name: "default/kubernetes", Class: api.ClassLB, Address: "203.0.113.1", Port: 443,
		HTTP2: &api.PeerHTTP2{Mode: api.HTTP2TLS, ServerName: "kubernetes.default.svc", APIServer: true}})
}

// servedHub is a hub with no static agents serving on loopback.
func servedHub(t *testing.T) (*Hub, string) {
	t.Helper()
	h := newTestHub(t, []string{"http://192.0.2.200:9808"}, "node")
	h.SetAgents(nil)
	go h.srv.Serve(h.ln)
	t.Cleanup(func() { h.srv.Close() })
	return h, "http://" + h.Addr().String()
}

func agentsOf(ps []api.Peer) map[string]string {
	out := map[string]string{}
	for _, p := range ps {
		if p.Class != api.ClassLB {
			out[p.Name] = "http://" + p.Address + ":9808"
		}
	}
	return out
}

func targetNames(ap api.AgentPlan) []string {
	var out []string
	for _, t := range ap.Targets {
		out = append(out, t.Name)
	}
	return out
}

func TestServePlan(t *testing.T) {
	h, base := servedHub(t)
	var empty api.PlanView
	getJSON(t, base+api.PlanPath, &empty)
	if empty.Agents == nil || len(empty.Agents) != 0 {
		t.Errorf("before discovery: %+v, want an empty agent list", empty)
	}
	ps := clusterPeers()
	h.SetPeers(ps, agentsOf(ps))
	var all api.PlanView
	getJSON(t, base+api.PlanPath+"?pretty", &all)
	if len(all.Agents) != 24 || all.RotationRounds != 1 {
		t.Fatalf("plan: %d agents, %d rotation rounds; want 24, 1", len(all.Agents), all.RotationRounds)
	}
	probers := map[string][]string{}
	for _, a := range all.Agents {
		if a.Version == "" || a.Group == "" || len(a.Targets) == 0 || a.Targets[0].Address == "" {
			t.Errorf("agent %s: %+v", a.Name, a)
		}
		for _, tg := range a.Targets {
			probers[tg.Name] = append(probers[tg.Name], a.Name)
		}
	}
	if page := get(t, base+"/app.js"); !strings.Contains(page, `fetch("api/v1/plan?node=`) {
		t.Error("the page does not show who probes a node")
	}
	var one api.PlanView
	getJSON(t, base+api.PlanPath+"?node=n21", &one)
	var names []string
	for _, a := range one.Agents {
		names = append(names, a.Name)
	}
	if !slices.Equal(names, []string{"n21", "pod-n21"}) {
		t.Errorf("?node=n21: agents %v, want n21 and its pod agent", names)
	}
	for _, a := range names {
		by := one.ProbedBy[a]
		slices.Sort(by)
		slices.Sort(probers[a])
		if len(by) < 3 || !slices.Equal(by, probers[a]) {
			t.Errorf("%s probed by %v; the full plan says %v", a, by, probers[a])
		}
	}
}

// TestAgentPlanLongPoll: an agent gets its plan at once, then holds a
// long-poll that answers as soon as its plan changes, 304 when nothing
// changed, 404 for an agent discovery does not know.
func TestAgentPlanLongPoll(t *testing.T) {
	h, base := servedHub(t)
	poll := func(agent, version string, wait int) (int, api.AgentPlan, time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := http.Get(fmt.Sprintf("%s%s%s?version=%s&wait=%d", base, api.AgentPlanPath, agent, version, wait))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ap api.AgentPlan
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&ap); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, ap, time.Since(start)
	}
	// An agent that asks before discovery knows it waits, then 404.
	if code, _, took := poll("n11", "", 1); code != http.StatusNotFound || took < 900*time.Millisecond {
		t.Errorf("unknown agent: %d after %v, want 404 after the 1s wait", code, took)
	}
	ps := clusterPeers()
	h.SetPeers(ps, agentsOf(ps))
	code, first, _ := poll("n11", "", 5)
	if code != http.StatusOK || first.Name != "n11" || len(first.Targets) == 0 {
		t.Fatalf("first poll: %d %+v", code, first)
	}
	if code, _, took := poll("n11", first.Version, 1); code != http.StatusNotModified || took < 900*time.Millisecond {
		t.Errorf("unchanged plan: %d after %v, want 304 after the 1s wait", code, took)
	}
	// A target of n11 leaves the cluster: the held poll answers at once.
	gone := first.Targets[len(first.Targets)-1].Name
	type answer struct {
		code int
		ap   api.AgentPlan
		took time.Duration
	}
	got := make(chan answer, 1)
	go func() {
		c, ap, took := poll("n11", first.Version, 30)
		got <- answer{c, ap, took}
	}()
	time.Sleep(300 * time.Millisecond) // the poll is held
	left := slices.DeleteFunc(slices.Clone(ps), func(p api.Peer) bool { return p.Name == gone })
	h.SetPeers(left, agentsOf(left))
	select {
	case a := <-got:
		if a.code != http.StatusOK || a.ap.Version == first.Version || slices.Contains(targetNames(a.ap), gone) {
			t.Errorf("after %s left: %d, version %s (was %s), targets %v", gone, a.code, a.ap.Version, first.Version, targetNames(a.ap))
		}
		if a.took > 2*time.Second {
			t.Errorf("the change reached the agent after %v, want within 2s", a.took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held poll did not answer the change")
	}
	if code, _, _ := poll("n11", "", 0); code != http.StatusOK {
		t.Errorf("wait=0 without a version: %d", code)
	}
	resp, err := http.Get(base + api.AgentPlanPath + "n11?wait=soon")
	if err == nil {
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("wait=soon: %v %v, want 400", resp.StatusCode, err)
	}
}

// TestReportIdentity: a report from an agent's address that names
// another agent is refused and filed under no name.
func TestReportIdentity(t *testing.T) {
	liar := agentServer(t, report("n21", "r2", map[string]string{"n31": "r3"}, 100, 50), 0, 200)
	honest := agentServer(t, report("n31", "r3", map[string]string{"n21": "r2"}, 100, 0), 0, 200)
	h := newTestHub(t, []string{liar}, "node")
	h.SetPeers(nil, map[string]string{"n11": liar, "n31": honest})
	h.Round(context.Background())
	v := h.matrixView()
	var refused *pull
	for i := range v.Pulls {
		if v.Pulls[i].URL == liar {
			refused = &v.Pulls[i]
		}
	}
	if refused == nil || refused.OK || !strings.Contains(refused.Error, `"n21"`) || !strings.Contains(refused.Error, `"n11"`) {
		t.Errorf("the liar's pull: %+v, want refused naming both", refused)
	}
	for _, g := range h.Snapshot().Groups {
		if g.Source == "n21" || g.Source == "n11" {
			t.Errorf("the refused report made a cell: %+v", g)
		}
	}
	if n := len(h.Snapshot().Groups); n != 1 {
		t.Errorf("%d cells, want the honest agent's 1", n)
	}
}

// TestPlanInferredRacks: nodes with no rack label are grouped by the first
// hop their agents report, and the plan hands each agent its rack.
func TestPlanInferredRacks(t *testing.T) {
	var ps []api.Peer
	agents := map[string]string{}
	for r := 1; r <= 2; r++ {
		for n := 1; n <= 4; n++ {
			node := fmt.Sprintf("n%d%d", r, n)
			obs := report(node, "", nil, 0, 0)
			obs.Agent.Labels = map[string]string{"node": node}
			obs.Agent.FirstHop = fmt.Sprintf("192.0.2.%d", 100+r) // RFC 5737: nothing is dialled
			agents[node] = agentServer(t, obs, 0, 200)
			ps = append(ps, api.Peer{Name: node, Class: api.ClassNode, Address: fmt.Sprintf("192.0.2.%d", 10*r+n), Port: 9808,
				Labels: map[string]string{"node": node}})
		}
	}
	h := newTestHub(t, []string{agents["n11"]}, "rack")
	h.SetPeers(ps, agents)
	p := h.Plan()
	if a, _ := p.Agent("n11"); a.Group != "" {
		t.Fatalf("before any report: n11 in group %q, want none", a.Group)
	}
	h.Round(context.Background())
	p = h.Plan()
	for _, peer := range ps {
		a, ok := p.Agent(peer.Name)
		want := "192.0.2.10" + peer.Name[1:2]
		if !ok || a.Group != want || a.Labels["rack"] != want {
			t.Errorf("%s: group %q, rack label %q; want both %s, its first hop", peer.Name, a.Group, a.Labels["rack"], want)
		}
	}
}

// TestWholePlanEncodedOncePerRebuild: every reader of the whole plan gets
// the bytes of one encoding until the plan is rebuilt, then the new plan.
func TestWholePlanEncodedOncePerRebuild(t *testing.T) {
	h, base := servedHub(t)
	ps := clusterPeers()
	h.SetPeers(ps, agentsOf(ps))
	body := func() []byte {
		h.planJSON.mu.Lock()
		defer h.planJSON.mu.Unlock()
		return h.planJSON.body
	}
	var first api.PlanView
	getJSON(t, base+api.PlanPath, &first)
	b1 := body()
	for range 3 {
		getJSON(t, base+api.PlanPath, &first)
	}
	if b2 := body(); len(b1) == 0 || &b1[0] != &b2[0] {
		t.Error("the whole plan was encoded again within one build")
	}
	ps = ps[:len(ps)-3] // n34, its pod and the LB gone: a rebuild
	h.SetPeers(ps, agentsOf(ps))
	var second api.PlanView
	getJSON(t, base+api.PlanPath, &second)
	if len(first.Agents) != 24 || len(second.Agents) != 22 {
		t.Errorf("plans of %d then %d agents, want 24, then 22 after the rebuild", len(first.Agents), len(second.Agents))
	}
}
