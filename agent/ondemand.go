package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/probe"
)

// requestTraceCap bounds a trace on demand. The operator waits for it on
// the matrix's page, and the server's write timeout (30 s,
// probe.NewResponder) must not cut its answer.
const requestTraceCap = 20 * time.Second

// refusal is why a trace on demand did not run: an HTTP status and a
// sentence for the operator.
type refusal struct {
	status     int
	retryAfter time.Duration // with 429
	msg        string
}

func (r *refusal) Error() string { return r.msg }

func refuse(status int, format string, args ...any) *refusal {
	return &refusal{status: status, msg: fmt.Sprintf(format, args...)}
}

// serveTrace is POST api.TracePath?target=NAME&family=ipv4|ipv6: it
// traces every tcp_syn flow of that target now and answers an
// api.TraceResult (docs/agent.md). The pull guard leaves it to the matrix;
// an agent that follows none (static mode) still asks for
// api.TraceHeader, which a foreign page in a browser cannot send.
func (a *Agent) serveTrace(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(api.TraceHeader) == "" {
		http.Error(w, "a trace is asked for by the matrix or prober trace: set the "+api.TraceHeader+" header", http.StatusForbidden)
		return
	}
	if a.paths == nil {
		msg := "this agent does not probe tcp_syn (probing.protocols): it has no flows to trace"
		if !a.cfg.Tracing.On {
			msg = "tracing is off on this agent (probing.trace.enabled: false)"
		}
		http.Error(w, msg, http.StatusConflict)
		return
	}
	// The server's write timeout counts from the request: the trace
	// may take most of it.
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(requestTraceCap + 10*time.Second))
	q := r.URL.Query()
	res, err := a.paths.traceNow(r.Context(), q.Get("target"), q.Get("family"), q.Get(api.TraceLarge) == "1")
	if err != nil {
		var rf *refusal
		if !errors.As(err, &rf) {
			rf = refuse(http.StatusInternalServerError, "trace: %v", err)
		}
		if rf.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(rf.retryAfter.Seconds()))))
		}
		http.Error(w, rf.msg, rf.status)
		return
	}
	b, err := json.Marshal(res)
	if err != nil {
		a.log.Error("trace encode", "err", err)
		http.Error(w, "trace encode failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

// traceNow traces every tcp_syn flow of the target (name, family) at
// once, each from its own source port so that it follows the flow's ECMP
// path, and keeps the paths as a periodic trace would. It draws one token
// a flow from the budget the periodic traces use, and runs one at a time:
// an operator's clicks must not flood the switches' ICMP engines either.
// Large, it pads each probe to the target's large probes' size: the
// flows end where a path MTU black hole swallows them, and as those are
// not the flows' paths they are not kept. A refusal is a *refusal.
func (p *paths) traceNow(ctx context.Context, name, family string, large bool) (api.TraceResult, error) {
	var res api.TraceResult
	if name == "" || len(name) > api.MaxString {
		return res, refuse(http.StatusBadRequest, "target: a target name is required: ?target=NAME&family=ipv4|ipv6")
	}
	if family != "" && family != api.FamilyIPv4 && family != api.FamilyIPv6 {
		return res, refuse(http.StatusBadRequest, "family: %.64q not one of %s, %s", family, api.FamilyIPv4, api.FamilyIPv6)
	}
	key, t, rf := p.a.findTarget(name, family)
	if rf != nil {
		return res, rf
	}
	n := len(t.ports)
	if n == 0 {
		return res, refuse(http.StatusNotFound, "target %s (%s) has no tcp_syn flows", name, key.family)
	}
	if large && t.mtuSize == 0 {
		return res, refuse(http.StatusConflict, "target %s (%s) gets no large probes here (probing.pmtu off, or the MTU towards it unknown): nothing to trace large", name, key.family)
	}
	if n > p.cfg.BudgetPerMinute {
		return res, refuse(http.StatusConflict, "target %s has %d flows, more traces than probing.trace.budgetPerMinute (%d) ever allows at once", name, n, p.cfg.BudgetPerMinute)
	}
	if !p.request.TryLock() {
		p.mu.Lock()
		wait := p.requestEnd.Sub(p.a.now())
		p.mu.Unlock()
		return res, &refusal{status: http.StatusTooManyRequests, retryAfter: max(wait, time.Second),
			msg: "a trace is already running on this agent (one at a time): retry when it ends"}
	}
	defer p.request.Unlock()

	now := p.a.now()
	p.mu.Lock()
	life := p.life
	if life == nil {
		p.mu.Unlock()
		return res, refuse(http.StatusServiceUnavailable, "the agent is starting: retry in a second")
	}
	p.refill(now)
	if held := p.tokens; held < float64(n) {
		p.mu.Unlock()
		wait := max(time.Second, time.Duration((float64(n)-held)/float64(p.cfg.BudgetPerMinute)*float64(time.Minute)))
		return res, &refusal{status: http.StatusTooManyRequests, retryAfter: wait,
			msg: fmt.Sprintf("the trace budget (probing.trace.budgetPerMinute %d) holds %d of the %d traces target %s needs: retry in %.0fs",
				p.cfg.BudgetPerMinute, int(held), n, name, math.Ceil(wait.Seconds()))}
	}
	p.tokens -= float64(n)
	p.requestEnd = now.Add(requestTraceCap)
	p.mu.Unlock()
	p.traces.WithLabelValues(traceRequest).Add(float64(n))
	p.a.log.Info("trace on demand", "peer", name, "family", key.family, "flows", n)

	ctx, cancel := context.WithTimeout(ctx, requestTraceCap)
	defer cancel()
	defer context.AfterFunc(life, cancel)()
	tc := p.tc
	tc.Concurrency = n // all at once: the rate still bounds the probes
	// Someone waits for this one, as for prober trace: re-probe the hops
	// rate-limited routers left silent, a second apart, within the cap.
	tc.Retries = min(probe.DefaultTraceRetries, 255-tc.Probes)
	if large {
		tc.Size = t.mtuSize
	}
	start := time.Now()
	fts, err := p.trs[key.family].Trace(ctx, probe.Target{Addr: t.Addr, Port: t.Port}, t.ports, tc)
	switch {
	case life.Err() != nil:
		return res, refuse(http.StatusServiceUnavailable, "the agent is stopping")
	case errors.Is(err, context.DeadlineExceeded):
		return res, refuse(http.StatusGatewayTimeout, "the trace of %s did not end within %s", name, requestTraceCap)
	case err != nil:
		return res, err
	}
	for i, ft := range fts {
		if !large {
			p.keep(flowKey{key, t.ports[i]}, t.Addr, ft)
		}
	}
	return api.TraceResult{
		Agent: p.a.cfg.Name, Target: name, Address: t.Addr.String(), Port: t.Port,
		Source: t.eng.src.String(), Family: key.family, ProbesPerHop: tc.Probes, ProbeSize: tc.Size,
		DurationSeconds: time.Since(start).Seconds(), Flows: traceFlows(fts),
	}, nil
}

// requested is what a trace on demand needs of a target, copied under
// the agent's lock.
type requested struct {
	Target
	eng     *engines
	ports   []uint16
	mtuSize int
}

// findTarget is the target name of family; with no family, its only one.
func (a *Agent) findTarget(name, family string) (targetKey, requested, *refusal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var found []targetKey
	for _, fam := range api.Families {
		k := targetKey{name, fam}
		if (family == "" || family == fam) && a.targets[k] != nil {
			found = append(found, k)
		}
	}
	switch len(found) {
	case 0:
		fam := family
		if fam == "" {
			fam = "any family"
		}
		return targetKey{}, requested{}, refuse(http.StatusNotFound, "no target %q (%s) in this agent's plan", name, fam)
	case 2:
		return targetKey{}, requested{}, refuse(http.StatusBadRequest, "target %s is probed over ipv4 and ipv6: say which with family=", name)
	}
	t := a.targets[found[0]]
	return found[0], requested{Target: t.Target, eng: t.eng, ports: slices.Clone(t.ports), mtuSize: t.mtuSize}, nil
}

// traceFlows is the wire form of flow traces.
func traceFlows(fts []probe.FlowTrace) []api.TraceFlow {
	out := make([]api.TraceFlow, len(fts))
	for i, ft := range fts {
		f := api.TraceFlow{SourcePort: ft.SourcePort, Reached: ft.Reached, Sent: ft.Sent, Received: ft.Received, Hops: make([]api.TraceHop, len(ft.Hops))}
		for j, h := range ft.Hops {
			f.Hops[j] = api.TraceHop{
				TTL: h.TTL, Address: addrString(h.Addr), Sent: h.Sent, Received: h.Received, RTTSeconds: h.RTT.Seconds(),
				Destination: h.Destination, Unreachable: h.Unreachable, Inferred: h.Inferred,
			}
		}
		out[i] = f
	}
	return out
}
