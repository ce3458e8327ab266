package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/auth"
	"github.com/netprober/prober/plan"
)

// planState is the probe plan the hub serves, rebuilt when discovery's
// peers or the inferred racks change, and when the rotation advances. It
// has its own locks, apart from the matrix's: a rebuild at 10,000 nodes
// takes half a second and a round up to a second, and neither may hold up
// the agents' long-polls.
type planState struct {
	build sync.Mutex // serializes rebuilds; not held while serving

	mu      sync.Mutex        // guards the fields below
	peers   []api.Peer        // from discovery, ungrouped
	racks   map[string]string // inferred racks the plans were built with
	plans   *plan.Plans       // nil before the first peers
	version map[string]string // agent name -> its plan's version
	round   int
	// gen counts the rebuilds: the whole plan's cached encoding is of one.
	gen uint64
	// changed is closed, and replaced, at every rebuild: long-polls wait
	// on it.
	changed chan struct{}
}

// Plan returns the current plans; nil before discovery's first peers.
func (h *Hub) Plan() *plan.Plans {
	h.plan.mu.Lock()
	defer h.plan.mu.Unlock()
	return h.plan.plans
}

// SetPeers replaces the cluster discovery found: the peers the plan is
// built from (node and pod agents, LB targets) and the agents pulled,
// base URL by agent name. A report from an agent's URL must name that
// agent.
func (h *Hub) SetPeers(peers []api.Peer, agents map[string]string) {
	urls := make([]string, 0, len(agents))
	names := make(map[string]string, len(agents))
	for name, u := range agents {
		urls = append(urls, u)
		names[u] = name
	}
	pods := make(map[string]agentPod, len(agents))
	for _, p := range peers {
		if p.Pod != "" {
			pods[p.Name] = agentPod{p.Pod, p.PodUID}
		}
	}
	h.SetAgents(urls)
	h.mu.Lock()
	h.names, h.pods = names, pods
	h.mu.Unlock()
	h.plan.mu.Lock()
	h.plan.peers = slices.Clone(peers)
	h.plan.mu.Unlock()
	h.rebuild()
}

// rebuild recomputes every plan from the peers, the racks the matrix
// inferred and the rotation round, then wakes the long-polls. It builds
// without holding the state's lock; rebuilds take turns, each from the
// latest inputs.
func (h *Hub) rebuild() {
	ps := &h.plan
	ps.build.Lock()
	defer ps.build.Unlock()
	ps.mu.Lock()
	peers, racks, round, old := ps.peers, ps.racks, ps.round, ps.version
	ps.mu.Unlock()
	if peers == nil {
		return
	}
	grouped := slices.Clone(peers)
	plan.Group(grouped, racks)
	p := plan.Build(grouped, plan.BuildOptions{
		MaxTargets: h.cfg.Plan.MaxTargets, InGroup: h.cfg.Plan.InGroup, Round: round,
	})
	version := make(map[string]string, len(old))
	changed := 0
	for _, a := range p.Agents() {
		ap, _ := p.Agent(a.Name)
		version[a.Name] = ap.Version
		if old[a.Name] != ap.Version {
			changed++
		}
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.plans, ps.version = p, version
	ps.gen++
	if changed > 0 || ps.changed == nil {
		if ps.changed != nil {
			close(ps.changed)
		}
		ps.changed = make(chan struct{})
	}
	h.met.planAgents.Set(float64(len(version)))
	h.met.planBuilds.Inc()
}

// setRacks rebuilds the plans when the racks the matrix inferred from the
// agents' first hops differ from those the plans were built with.
func (h *Hub) setRacks(racks map[string]string) {
	h.plan.mu.Lock()
	same := maps.Equal(racks, h.plan.racks)
	h.plan.racks = racks
	h.plan.mu.Unlock()
	if !same {
		h.rebuild()
	}
}

// rotate advances the plan's round every period when the rotation has
// more than one round.
func (h *Hub) rotate(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.plan.mu.Lock()
		p := h.plan.plans
		rotating := p != nil && p.RotationRounds > 1
		if rotating {
			h.plan.round = (p.Round + 1) % p.RotationRounds
		}
		h.plan.mu.Unlock()
		if rotating {
			h.rebuild()
		}
	}
}

// defaultPlanWait is how long an agent's long-poll is held when it does
// not say.
const defaultPlanWait = 30 * time.Second

// serveAgentPlan answers an agent's long-poll for its plan: at once when
// its version is not the current one, else when the plan changes or the
// wait ends (304, not modified). An agent discovery does not know (yet:
// it is not Ready) waits too, then gets 404.
func (h *Hub) serveAgentPlan(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	have := r.URL.Query().Get("version")
	wait := defaultPlanWait
	if s := r.URL.Query().Get("wait"); s != "" {
		secs, err := strconv.Atoi(s)
		if err != nil || secs < 0 {
			http.Error(w, "wait: want whole seconds", http.StatusBadRequest)
			return
		}
		wait = min(time.Duration(secs)*time.Second, api.MaxPlanWait*time.Second)
	}
	var claims *auth.Claims
	if h.auth != nil {
		var err *authError
		if claims, err = h.auth.token(r.Context(), r, h.now()); err != nil {
			h.refuseAgent(w, name, err)
			return
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		h.plan.mu.Lock()
		p, v, changed := h.plan.plans, h.plan.version[name], h.plan.changed
		h.plan.mu.Unlock()
		if v != "" && !h.keyAgent(w, claims, name) {
			return
		}
		if v != "" && v != have {
			ap, _ := p.Agent(name)
			h.writeJSON(w, r, ap)
			return
		}
		select {
		case <-changed: // nil before the first plan: only the timer ends it
			continue
		case <-r.Context().Done():
			return
		case <-timer.C:
		}
		if v == "" {
			http.Error(w, "no plan for agent "+strconv.Quote(name)+": discovery has not found it (a Ready prober pod, or a Node with one)", http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNotModified)
		return
	}
}

// keyAgent checks that the long-poll's token is of name's pod and puts
// name's pull key on the answer; false when it refused the request.
func (h *Hub) keyAgent(w http.ResponseWriter, claims *auth.Claims, name string) bool {
	if h.auth == nil {
		return true
	}
	h.mu.Lock()
	pod := h.pods[name]
	h.mu.Unlock()
	if err := h.auth.bind(claims, name, pod.name, pod.uid); err != nil {
		h.refuseAgent(w, name, err)
		return false
	}
	w.Header().Set(api.PullKeyHeader, h.auth.pullKey(name))
	return true
}

func (h *Hub) refuseAgent(w http.ResponseWriter, name string, err *authError) {
	h.met.authFailures.WithLabelValues(err.reason).Inc()
	h.log.Debug("agent plan refused", "agent", name, "err", err)
	http.Error(w, err.Error(), err.status)
}

// servePlan answers PlanPath: every agent's plan, streamed agent by agent
// (at 10,000 nodes the whole answer is large), or with ?node= that node's
// agents and who probes them.
func (h *Hub) servePlan(w http.ResponseWriter, r *http.Request) {
	h.plan.mu.Lock()
	p, gen := h.plan.plans, h.plan.gen // together: the cache keys p by gen
	h.plan.mu.Unlock()
	view := api.PlanView{Agents: []api.AgentPlan{},
		PlanRotation: api.PlanRotation{RotationRounds: 1, RotationSeconds: h.cfg.Plan.Rotation.D().Seconds()}}
	if p == nil {
		h.writeJSON(w, r, view)
		return
	}
	view.Round, view.RotationRounds = p.Round, p.RotationRounds
	if node := r.URL.Query().Get("node"); node != "" {
		view.ProbedBy = map[string][]string{}
		for _, a := range p.Agents() {
			if a.Name == node || a.Node == node {
				ap, _ := p.Agent(a.Name)
				view.Agents = append(view.Agents, ap)
				view.ProbedBy[a.Name] = p.ProbedBy(a.Name)
			}
		}
		h.writeJSON(w, r, view)
		return
	}
	// The whole plan, encoded once per rebuild and shared by every reader
	// (31.8 MB and half a CPU-second per request at 5,000 nodes before).
	h.serveCached(w, r, &h.planJSON, gen, time.Hour, func(b *bytes.Buffer) error {
		head, _ := json.Marshal(view.PlanRotation)
		b.Write(head[:len(head)-1])
		b.WriteString(`,"agents":[`)
		enc := json.NewEncoder(b)
		for i, a := range p.Agents() {
			if i > 0 {
				b.WriteByte(',')
			}
			ap, _ := p.Agent(a.Name)
			if err := enc.Encode(ap); err != nil {
				return fmt.Errorf("plan of %s: %w", a.Name, err)
			}
		}
		b.WriteString("]}\n")
		return nil
	})
}
