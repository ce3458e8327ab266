package peers

import (
	"cmp"
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaseName is the Lease whose holder, of the matrix's replicas, writes
// Node conditions and Events.
const LeaseName = "prober-matrix-node-conditions"

// Election is how the matrix's replicas agree which one writes: a
// Lease in Namespace, held by one Identity (a pod's name) at a time.
type Election struct {
	Namespace, Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's; 0
	// means 15 s, 10 s and 2 s: a replica that dies is replaced within
	// about 15 s, one that stops cleanly hands over at once.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// runElected runs the reporter (run) only while this replica holds the
// Lease, and stands by otherwise, until ctx ends: of several replicas,
// one writes, so the write bound holds for the cluster. A new holder
// learns what the Nodes carry first, as a restarted matrix does.
func (r *Reporter) runElected(ctx context.Context, e Election) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: LeaseName},
		Client:     r.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
	}
	// One goroutine runs the reporter for each term in turn: a term's
	// run ends with its context before the next can start.
	terms := make(chan context.Context)
	worker := make(chan struct{})
	go func() {
		defer close(worker)
		for {
			select {
			case tctx := <-terms:
				r.log.Info("node conditions: this replica writes them", "lease", e.Namespace+"/"+LeaseName)
				if err := r.run(tctx); err != nil {
					r.log.Error("node conditions", "err", err)
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() { <-worker }()
	for ctx.Err() == nil {
		// client-go retries a refused Lease in silence: say why here.
		if _, err := lock.Client.Leases(e.Namespace).Get(ctx, LeaseName, metav1.GetOptions{}); err != nil && !apierrors.IsNotFound(err) {
			if ctx.Err() != nil {
				return nil
			}
			hint := ""
			if apierrors.IsForbidden(err) {
				hint = "the matrix's ServiceAccount needs the chart's Role prober-matrix-node-conditions (matrix.nodeConditions.enabled)"
			}
			r.log.Error("node conditions: cannot read the Lease that elects the replica writing them; writing nothing until it can",
				"lease", e.Namespace+"/"+LeaseName, "err", err, "hint", hint)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(30 * time.Second):
			}
			continue
		}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			Name:            LeaseName,
			LeaseDuration:   cmp.Or(e.LeaseDuration, 15*time.Second),
			RenewDeadline:   cmp.Or(e.RenewDeadline, 10*time.Second),
			RetryPeriod:     cmp.Or(e.RetryPeriod, 2*time.Second),
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(tctx context.Context) {
					select {
					case terms <- tctx:
					case <-tctx.Done():
					}
				},
				OnStoppedLeading: func() {},
				OnNewLeader: func(id string) {
					if id != e.Identity {
						r.log.Info("node conditions: another replica writes them", "holder", id)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("node conditions: election: %w", err)
		}
		le.Run(ctx) // returns when ctx ends or the term does
	}
	return nil
}
