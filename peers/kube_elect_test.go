package peers_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/peers"
)

// TestKubeNodeConditionsElected: two matrix replicas (reporters with an
// Election, as cmd/prober runs them) see the same diagnoses; the one
// holding the Lease writes, the other writes nothing; when the holder
// stops, the other takes the Lease and writes what comes next. Real
// kube-apiserver, the chart's RBAC.
func TestKubeNodeConditionsElected(t *testing.T) {
	_, admin, client, ps := conditionsCluster(t, "elect", "elect-1", "elect-2")
	t.Cleanup(func() {
		_ = admin.CoordinationV1().Leases("prober").Delete(context.Background(), peers.LeaseName, metav1.DeleteOptions{})
	})
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	type replica struct {
		r    *peers.Reporter
		stop func()
	}
	replicas := map[string]replica{}
	for _, id := range []string{"matrix-a", "matrix-b"} {
		r := peers.NewReporter(client, peers.ReporterConfig{WritesPerMinute: 6, Instance: id,
			Election: &peers.Election{Namespace: "prober", Identity: id,
				LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}}, log)
		r.SetPeers(ps)
		replicas[id] = replica{r, sync.OnceFunc(runReporter(t, r))}
		t.Cleanup(replicas[id].stop)
	}
	host := func(name string) api.Diagnosis {
		return api.Diagnosis{Suspects: []api.Suspect{{Kind: api.KindHost, Name: name, Score: 0.6, Evidence: api.Evidence{Detail: "its own links lose 0.1"}}}}
	}
	for _, rp := range replicas {
		rp.r.Observe(host("elect-1"))
	}
	waitCondition(t, admin, "elect-1", corev1.ConditionTrue, peers.ReasonHostLoss)
	holder := leaseHolder(t, admin)
	other := map[string]string{"matrix-a": "matrix-b", "matrix-b": "matrix-a"}[holder]
	if other == "" {
		t.Fatalf("the Lease's holder is %q, want one of the replicas", holder)
	}
	// One set of writes: the holder's; the other stands by.
	waitWrites(t, replicas[holder].r, "event/ok=1 node_condition/ok=1", 0)
	time.Sleep(time.Second)
	if w := writes(replicas[other].r); w != "" {
		t.Errorf("%s, not holding the Lease, wrote %s", other, w)
	}
	// The holder stops (a rolling update, a drain): it hands the Lease
	// over as it goes, and the other writes what comes next.
	replicas[holder].stop()
	stopped := writes(replicas[holder].r)
	start := time.Now()
	for _, rp := range replicas {
		rp.r.Observe(api.Diagnosis{Suspects: []api.Suspect{{Kind: api.KindDataplane, Name: "elect-2", Score: 0.6}}})
	}
	waitCondition(t, admin, "elect-2", corev1.ConditionTrue, peers.ReasonDataplaneLoss)
	t.Logf("%s took over from %s and wrote in %v", other, holder, time.Since(start).Round(100*time.Millisecond))
	if h := leaseHolder(t, admin); h != other {
		t.Errorf("the Lease's holder is %q after %s stopped, want %s", h, holder, other)
	}
	waitWrites(t, replicas[other].r, "event/ok=1 node_condition/ok=1", 0)
	if w := writes(replicas[holder].r); w != stopped {
		t.Errorf("%s wrote after it stopped: %s, then %s", holder, stopped, w)
	}
}

// leaseHolder is the holder of the Lease the replicas elect by, once
// one holds it.
func leaseHolder(t *testing.T, admin kubernetes.Interface) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		l, err := admin.CoordinationV1().Leases("prober").Get(t.Context(), peers.LeaseName, metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			return *l.Spec.HolderIdentity
		}
	}
	t.Fatalf("no one holds the Lease prober/%s within 10 s", peers.LeaseName)
	return ""
}

// writes is r's count of writes, as waitWrites reads it.
func writes(r *peers.Reporter) string {
	var out []string
	r.Writes(func(object, result string, n uint64) {
		out = append(out, fmt.Sprintf("%s/%s=%d", object, result, n))
	})
	return strings.Join(out, " ")
}
