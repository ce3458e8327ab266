package peers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netprober/prober/api"
)

// The Node condition the matrix writes (kubernetes.nodeConditions), and
// the reasons of it and of its Events (docs/kubernetes.md).
const (
	// NodeConditionType is True while the node's host or its dataplane
	// is a listed suspect, False once it has not been for ClearAfter.
	NodeConditionType = "ProberNetworkProblem"
	// ReasonHostLoss: the node's own links lose, both ways, while its
	// neighbours' do not (a host suspect: its NIC, cable or agent).
	ReasonHostLoss = "HostLoss"
	// ReasonDataplaneLoss: the node's pods' paths lose while its own do
	// not (a dataplane suspect: its CNI, veths or conntrack).
	ReasonDataplaneLoss = "DataplaneLoss"
	// ReasonNoProblem: the condition cleared.
	ReasonNoProblem = "NoNetworkProblem"
	// ReasonServiceLoss is the Event on a Service a suspect names: its
	// VIP loses while its backends answer.
	ReasonServiceLoss = "ServiceLoss"
	// ReportingController names the matrix in its Events.
	ReportingController = "netprober.io/prober-matrix"
)

// ClearAfter is how long a node must go unlisted before its condition
// clears: suspects come and go round to round at the edge of
// significance, and each change is two writes.
const ClearAfter = time.Minute

// Reporter writes what the matrix finds onto the cluster's objects: the
// NodeConditionType condition on a Node whose host or dataplane is a
// listed suspect, cleared when it has not been for ClearAfter, an Event
// on the Node at each change, and an Event on a Service a suspect names
// when it is first listed. Every write (a status patch, an Event) counts
// against one bound, writesPerMinute in any minute, whatever the
// cluster's size (seed 003: a monitor's own requests once overloaded an
// API server); what the bound holds back waits, the surest first. The
// matrix's rounds hand it diagnoses (Observe) and never wait on it.
type Reporter struct {
	client   kubernetes.Interface
	log      *slog.Logger
	instance string
	now      func() time.Time
	// clearAfter: ClearAfter, or the config's.
	clearAfter time.Duration
	elect      *Election
	wake       chan struct{}

	mu       sync.Mutex
	nodes    map[string]bool                   // node peers by name, from discovery
	listed   map[string]finding                // nodes listed in the last diagnosis
	seen     map[string]time.Time              // when each node was last listed
	services map[string]finding                // Services listed in the last diagnosis
	pending  map[string]finding                // Services newly listed, their Event not yet written
	limit    writeWindow                       // the bound, shared by every write
	state    map[string]corev1.ConditionStatus // what each Node carries of the condition
	deferred int                               // changes the bound held back, last logged
	written  map[[2]string]uint64              // writes by object and result (Writes)
}

// finding is what a suspect says of a node or Service.
type finding struct {
	reason, message string
	score           float64
}

// ReporterConfig is a Reporter's bound and names.
type ReporterConfig struct {
	// WritesPerMinute bounds the writes in any minute (at least 1).
	WritesPerMinute int
	// Instance names the matrix's pod in its Events.
	Instance string
	// ClearAfter is how long a node goes unlisted before its condition
	// clears; 0 means ClearAfter.
	ClearAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Election, when set, has the matrix's replicas elect the one that
	// writes; nil: this one writes.
	Election *Election
}

// NewReporter returns a Reporter writing through client.
func NewReporter(client kubernetes.Interface, cfg ReporterConfig, logger *slog.Logger) *Reporter {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Reporter{
		client: client, log: logger, instance: truncate(cfg.Instance, 128),
		now: now, clearAfter: cmp.Or(cfg.ClearAfter, ClearAfter), elect: cfg.Election,
		wake:  make(chan struct{}, 1),
		nodes: map[string]bool{}, listed: map[string]finding{}, seen: map[string]time.Time{},
		services: map[string]finding{}, pending: map[string]finding{},
		limit:   writeWindow{n: max(cfg.WritesPerMinute, 1)},
		state:   map[string]corev1.ConditionStatus{},
		written: map[[2]string]uint64{},
	}
}

// Objects and results Writes counts by.
const (
	WriteNodeCondition = "node_condition"
	WriteEvent         = "event"
	WriteOK            = "ok"
	WriteError         = "error"
)

// Writes visits the writes made so far by object (WriteNodeCondition,
// WriteEvent) and result (WriteOK, WriteError), and returns the changes
// the bound holds back now: what the matrix exports of its own load on
// the API server.
func (r *Reporter) Writes(visit func(object, result string, n uint64)) (held int) {
	r.mu.Lock()
	written, held := maps.Clone(r.written), r.deferred
	r.mu.Unlock() // visit sends on a scrape's channel: never under r.mu
	for _, k := range slices.SortedFunc(maps.Keys(written), func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	}) {
		visit(k[0], k[1], written[k])
	}
	return held
}

// count records a write's result. r.mu is held.
func (r *Reporter) count(object string, err error) {
	result := WriteOK
	if err != nil {
		result = WriteError
	}
	r.written[[2]string{object, result}]++
}

// SetPeers tells the reporter which names are Nodes (a host suspect may
// also be a pod or a target).
func (r *Reporter) SetPeers(ps []Peer) {
	nodes := map[string]bool{}
	for _, p := range ps {
		if p.Class == ClassNode {
			nodes[p.Name] = true
		}
	}
	r.mu.Lock()
	r.nodes = nodes
	for n := range r.seen { // nodes gone from the cluster
		if !nodes[n] && r.state[n] != corev1.ConditionTrue {
			delete(r.seen, n)
		}
	}
	r.mu.Unlock()
}

// Observe takes a round's diagnosis. It never blocks.
func (r *Reporter) Observe(d api.Diagnosis) {
	now := r.now()
	listed, services := map[string]finding{}, map[string]finding{}
	r.mu.Lock()
	for _, s := range d.Listed() {
		f := finding{message: truncate(fmt.Sprintf("prober: %s (score %.2f)", s.Evidence.Detail, s.Score), 1000), score: s.Score}
		switch s.Kind {
		case api.KindHost, api.KindDataplane:
			if !r.nodes[s.Name] {
				continue // a pod's or a target's
			}
			f.reason = ReasonHostLoss
			if s.Kind == api.KindDataplane {
				f.reason = ReasonDataplaneLoss
			}
			if prev, ok := listed[s.Name]; !ok || prev.score < f.score {
				listed[s.Name] = f
			}
			r.seen[s.Name] = now
		case api.KindLB:
			key, _, _ := strings.Cut(s.Name, "@") // a LoadBalancer's ingress IP
			if ns, name, ok := strings.Cut(key, "/"); !ok || ns == "" || name == "" {
				continue // the external API server address: no object
			}
			f.reason = ReasonServiceLoss
			services[key] = f
			if _, was := r.services[key]; !was {
				r.pending[key] = f
			}
		}
	}
	r.listed, r.services = listed, services
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run learns what the Nodes carry (trying again every 30 s while it
// cannot), then writes changes as Observe brings them and the bound
// allows, until ctx ends. With an Election, it does so only while this
// replica holds the Lease.
func (r *Reporter) Run(ctx context.Context) error {
	if r.elect != nil {
		return r.runElected(ctx, *r.elect)
	}
	return r.run(ctx)
}

// run is Run for the one replica that writes.
func (r *Reporter) run(ctx context.Context) error {
	for {
		err := r.learn(ctx)
		if err == nil {
			break
		}
		hint := ""
		if apierrors.IsForbidden(err) {
			hint = "the matrix's ServiceAccount needs the chart's node conditions RBAC (matrix.nodeConditions.enabled)"
		}
		r.log.Error("node conditions: cannot read the Nodes; writing nothing until it can", "err", err, "hint", hint)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(30 * time.Second):
		}
	}
	tick := time.NewTicker(10 * time.Second) // for clears and what the bound held back
	defer tick.Stop()
	for {
		r.reconcile(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-tick.C:
		}
	}
}

// learn lists the Nodes once, from the API server's cache, for the
// condition a previous matrix left on them and their UIDs.
func (r *Reporter) learn(ctx context.Context) error {
	opts := metav1.ListOptions{ResourceVersion: "0"}
	for {
		list, err := r.client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return fmt.Errorf("node conditions: list nodes: %w", err)
		}
		r.mu.Lock()
		for i := range list.Items {
			n := &list.Items[i]
			for _, c := range n.Status.Conditions {
				if c.Type != NodeConditionType {
					continue
				}
				r.state[n.Name] = c.Status
				// Left by an earlier matrix: cleared only once this one
				// has not listed the node for as long as it would wait.
				if _, ok := r.seen[n.Name]; !ok && c.Status == corev1.ConditionTrue {
					r.seen[n.Name] = r.now()
				}
			}
		}
		r.mu.Unlock()
		if list.Continue == "" {
			return nil
		}
		opts = metav1.ListOptions{Continue: list.Continue}
	}
}

// change is one write plan: a node's condition to status, or a Service's
// Event.
type change struct {
	node, service string
	status        corev1.ConditionStatus
	f             finding
}

// writes is what c costs against the bound: a condition's patch and its
// Event, or a Service's Event.
func (c change) writes() int {
	if c.node != "" {
		return 2
	}
	return 1
}

// plan lists the changes due, the surest first: conditions to set,
// then to clear, then Services' Events. r.mu is held.
func (r *Reporter) plan(now time.Time) []change {
	var sets, clears, events []change
	for node, f := range r.listed {
		if r.state[node] != corev1.ConditionTrue {
			sets = append(sets, change{node: node, status: corev1.ConditionTrue, f: f})
		}
	}
	for node, st := range r.state {
		if _, ok := r.listed[node]; !ok && st == corev1.ConditionTrue && now.Sub(r.seen[node]) >= r.clearAfter {
			clears = append(clears, change{node: node, status: corev1.ConditionFalse,
				f: finding{reason: ReasonNoProblem, message: "prober: no longer a suspect"}})
		}
	}
	for svc, f := range r.pending {
		events = append(events, change{service: svc, f: f})
	}
	bySure := func(a, b change) int {
		return cmp.Or(cmp.Compare(b.f.score, a.f.score), strings.Compare(a.node+a.service, b.node+b.service))
	}
	slices.SortFunc(sets, bySure)
	slices.SortFunc(clears, bySure)
	slices.SortFunc(events, bySure)
	return slices.Concat(sets, clears, events)
}

// reconcile writes the changes due as far as the bound allows.
func (r *Reporter) reconcile(ctx context.Context) {
	now := r.now()
	r.mu.Lock()
	todo := r.plan(now)
	held := 0
	for i, c := range todo {
		if !r.limit.take(now, c.writes()) {
			held = len(todo) - i
			todo = todo[:i]
			break
		}
	}
	if held != r.deferred && held > 0 {
		r.log.Warn("node conditions: the write bound holds changes back", "waiting", held, "writes_per_minute", r.limit.n)
	}
	r.deferred = held
	r.mu.Unlock()
	for _, c := range todo {
		if ctx.Err() != nil {
			return
		}
		if c.node != "" {
			r.setCondition(ctx, c, now)
		} else {
			r.serviceEvent(ctx, c, now)
		}
	}
}

// setCondition patches the node's condition and posts its Event.
func (r *Reporter) setCondition(ctx context.Context, c change, now time.Time) {
	t := metav1.NewTime(now)
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: NodeConditionType, Status: c.status, Reason: c.f.reason, Message: c.f.message,
		LastHeartbeatTime: t, LastTransitionTime: t,
	}}}})
	if err != nil {
		r.log.Warn("node conditions: encode", "node", c.node, "err", err)
		return
	}
	n, err := r.client.CoreV1().Nodes().PatchStatus(ctx, c.node, patch)
	r.mu.Lock()
	r.count(WriteNodeCondition, err)
	switch {
	case apierrors.IsNotFound(err):
		delete(r.state, c.node) // gone: nothing to set or clear
	case err != nil:
		r.log.Warn("node conditions: patch failed", "node", c.node, "status", c.status, "err", err)
	default:
		r.state[c.node] = c.status
	}
	r.mu.Unlock()
	if err != nil {
		return
	}
	r.log.Info("node condition", "node", c.node, "type", NodeConditionType, "status", c.status, "reason", c.f.reason)
	kind := corev1.EventTypeWarning
	if c.status != corev1.ConditionTrue {
		kind = corev1.EventTypeNormal
	}
	r.event(ctx, metav1.NamespaceDefault, corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: c.node, UID: n.UID}, kind, c.f, now)
}

// serviceEvent posts a Service's Event, once the Service is found.
func (r *Reporter) serviceEvent(ctx context.Context, c change, now time.Time) {
	r.mu.Lock()
	delete(r.pending, c.service)
	r.mu.Unlock()
	ns, name, _ := strings.Cut(c.service, "/")
	svc, err := r.client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		r.log.Warn("node conditions: no Service for its Event", "service", c.service, "err", err)
		return
	}
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: ns, Name: name, UID: svc.UID}
	r.event(ctx, ns, ref, corev1.EventTypeWarning, c.f, now)
}

// event creates one Event about ref.
func (r *Reporter) event(ctx context.Context, ns string, ref corev1.ObjectReference, kind string, f finding, now time.Time) {
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", truncate(ref.Name, 200), now.UnixNano()), Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: ReportingController,
		ReportingInstance:   r.instance,
		Action:              "Localize",
		Reason:              f.reason,
		Regarding:           ref,
		Note:                f.message,
		Type:                kind,
	}
	_, err := r.client.EventsV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
	r.mu.Lock()
	r.count(WriteEvent, err)
	r.mu.Unlock()
	if err != nil {
		r.log.Warn("node conditions: event failed", "regarding", ref.Kind+"/"+ref.Name, "reason", f.reason, "err", err)
	}
}

// writeWindow allows at most n writes in any minute.
type writeWindow struct {
	n  int
	at []time.Time // the writes of the last minute, oldest first
}

// take reports whether k more writes fit at now, and counts them if so.
func (w *writeWindow) take(now time.Time, k int) bool {
	cut := now.Add(-time.Minute)
	i := 0
	for i < len(w.at) && !w.at[i].After(cut) {
		i++
	}
	w.at = w.at[i:]
	if len(w.at)+k > w.n {
		return false
	}
	for range k {
		w.at = append(w.at, now)
	}
	return true
}

// truncate cuts s to at most n bytes, on a character's boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
