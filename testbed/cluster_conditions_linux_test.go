package testbed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/peers"
	"github.com/netprober/prober/testbed"
)

// The cluster's matrix runs with matrix.nodeConditions.enabled
// (docs/kubernetes.md): these read what it wrote, through kubectl.

// condition is node's prober condition: status and reason, "" when it
// carries none.
func (r *clusterRun) condition(ctx context.Context, t *testing.T, node string) (status, reason string) {
	out, err := r.c.Kubectl(ctx, "get", "node", node, "-o", "json")
	if err != nil {
		r.fatalf(t, "kubectl get node %s: %v\n%s", node, err, out)
	}
	var n struct {
		Status struct {
			Conditions []struct{ Type, Status, Reason string } `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &n); err != nil {
		r.fatalf(t, "kubectl get node %s: %v", node, err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == peers.NodeConditionType {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

// matrixEvents lists the matrix's Events as "Kind/name reason", oldest
// first.
func (r *clusterRun) matrixEvents(ctx context.Context, t *testing.T) []string {
	out, err := r.c.Kubectl(ctx, "get", "events", "-A", "--field-selector", "reportingComponent="+peers.ReportingController, "-o", "json")
	if err != nil {
		r.fatalf(t, "kubectl get events: %v\n%s", err, out)
	}
	var l struct {
		Items []struct {
			Reason         string `json:"reason"`
			InvolvedObject struct {
				Kind, Namespace, Name string
			} `json:"involvedObject"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		r.fatalf(t, "kubectl get events: %v", err)
	}
	var evs []string
	for _, e := range l.Items {
		name := e.InvolvedObject.Name
		if e.InvolvedObject.Namespace != "" {
			name = e.InvolvedObject.Namespace + "/" + name
		}
		evs = append(evs, e.InvolvedObject.Kind+"/"+name+" "+e.Reason)
	}
	return evs
}

// wroteNothing: a healthy cluster's matrix wrote no condition and no
// Event.
func (r *clusterRun) wroteNothing(ctx context.Context, t *testing.T) {
	for _, h := range r.c.Fabric.Nodes() {
		if st, reason := r.condition(ctx, t, h.Name); st != "" {
			r.errorf(t, "healthy cluster: node %s carries %s=%s (%s)", h.Name, peers.NodeConditionType, st, reason)
		}
	}
	if evs := r.matrixEvents(ctx, t); len(evs) > 0 {
		r.errorf(t, "healthy cluster: the matrix wrote Events: %v", evs)
	}
}

// waitCondition waits for node's condition to read status and reason.
func (r *clusterRun) waitCondition(ctx context.Context, t *testing.T, node, status, reason string, within time.Duration) time.Duration {
	start := time.Now()
	for {
		st, why := r.condition(ctx, t, node)
		if st == status && why == reason {
			return time.Since(start)
		}
		if time.Since(start) > within {
			_, d := r.get(ctx, t)
			r.fatalf(t, "node %s: %s=%q (%s), want %s (%s) within %v; the list:%s", node, peers.NodeConditionType, st, why, status, reason, within, describe(d))
		}
		sleep(ctx, 2*time.Second)
	}
}

// hostNIC: a node's NIC drops 10 % both ways. The matrix names the host
// and sets the condition on its Node, with an Event; after the fault the
// condition clears (a minute after the host is last listed).
func (r *clusterRun) hostNIC(ctx context.Context, t *testing.T) {
	ms, err := r.matrixPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Not a matrix's node: its pulls would lose too.
	var node string
	for _, h := range slices.Backward(r.c.Fabric.Nodes()) {
		if !slices.ContainsFunc(ms, func(p matrixPod) bool { return p.node == h.Name }) {
			node = h.Name
			break
		}
	}
	if node == "" {
		t.Fatalf("every node runs a matrix replica (%+v): none to fail", ms)
	}
	r.inject(ctx, t, lab.Fault{Kind: lab.FaultHostNIC, Host: node, Permille: 100})
	start := time.Now()
	r.waitFor(ctx, t, 2*time.Minute, "the matrix to name host "+node, func(_ testbed.MatrixView, d matrix.Diagnosis) error {
		for _, s := range d.Listed() {
			if s.Kind == matrix.KindHost && s.Name == node {
				return nil
			}
		}
		return fmt.Errorf("listed:%s", describe(d))
	})
	set := r.waitCondition(ctx, t, node, "True", peers.ReasonHostLoss, 30*time.Second)
	t.Logf("node %s: %s=True %v after the fault (%v after the matrix named it)", node, peers.NodeConditionType, time.Since(start).Round(time.Second), set.Round(time.Second))
	want := "Node/" + node + " " + peers.ReasonHostLoss
	if evs := r.matrixEvents(ctx, t); !slices.Contains(evs, want) {
		r.errorf(t, "no Event %q: %v", want, evs)
	}
	r.killWriter(ctx, t, node)
	r.clear(ctx, t)
	cleared := r.waitCondition(ctx, t, node, "False", peers.ReasonNoProblem, peers.ClearAfter+time.Minute)
	t.Logf("node %s: %s=False %v after the matrix was clean", node, peers.NodeConditionType, cleared.Round(time.Second))
	if evs := r.matrixEvents(ctx, t); !slices.Contains(evs, "Node/"+node+" "+peers.ReasonNoProblem) {
		r.errorf(t, "no Event clearing it: %v", evs)
	}
	for _, h := range r.c.Fabric.Nodes() {
		if st, _ := r.condition(ctx, t, h.Name); h.Name != node && st != "" {
			r.errorf(t, "node %s, whose NIC is fine, carries %s=%s", h.Name, peers.NodeConditionType, st)
		}
	}
}

// killWriter deletes the matrix replica holding the Lease, mid-fault, as
// a drain or a crash would: the other replica takes the Lease (and so
// the writes, which the caller's clear then needs) and, asked directly,
// still names host node.
func (r *clusterRun) killWriter(ctx context.Context, t *testing.T, node string) {
	t.Helper()
	lease := []string{"-n", "prober", "get", "lease", peers.LeaseName, "-o", "jsonpath={.spec.holderIdentity}"}
	holder, err := r.c.Kubectl(ctx, lease...)
	if err != nil || strings.TrimSpace(holder) == "" {
		r.fatalf(t, "the Lease %s: holder %q: %v", peers.LeaseName, holder, err)
	}
	holder = strings.TrimSpace(holder)
	ms, err := r.matrixPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var survivor string
	for _, p := range ms {
		if p.name != holder && p.ready && !p.deleting {
			survivor = p.url()
		}
	}
	if survivor == "" {
		r.fatalf(t, "no Ready matrix replica beside %s: %+v", holder, ms)
	}
	if out, err := r.c.Kubectl(ctx, "-n", "prober", "delete", "pod", holder, "--wait=false"); err != nil {
		t.Fatalf("delete %s: %v: %s", holder, err, out)
	}
	killed := time.Now()
	r.matrix.Base = survivor
	for {
		h, _ := r.c.Kubectl(ctx, lease...)
		if h = strings.TrimSpace(h); h != "" && h != holder {
			t.Logf("killed the replica writing conditions (%s) mid-fault; %s holds the Lease %v later", holder, h, time.Since(killed).Round(100*time.Millisecond))
			break
		}
		if time.Since(killed) > 30*time.Second {
			r.fatalf(t, "the Lease %s still held by %q 30 s after that pod's deletion", peers.LeaseName, h)
		}
		sleep(ctx, 500*time.Millisecond)
	}
	_, d := r.get(ctx, t)
	if !slices.ContainsFunc(d.Listed(), func(s matrix.Suspect) bool { return s.Kind == matrix.KindHost && s.Name == node }) {
		r.errorf(t, "the surviving replica does not name host %s:%s", node, describe(d))
	}
}
