package peers

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// sliceWatch follows the EndpointSlices of the probed Services only, for
// the lb peers' backends. A cluster-wide EndpointSlice watch would send
// every agent every endpoint change of the cluster (every pod of every
// Deployment starting, stopping or turning ready): the load seed 003
// warns of. Instead one informer is label-selected on
// kubernetes.io/service-name in (the probed Services' names), across
// namespaces (a Service of the same name elsewhere is filtered out when
// its slices are read), and is replaced when that set of names changes,
// which is when a Service is opted in or out: rarely.
//
// A replacement runs beside the current informer until its cache has
// synced, so the backends of the Services already probed never blink
// empty. Only Run's goroutine calls its methods.
type sliceWatch struct {
	client    kubernetes.Interface
	transform cache.TransformFunc
	handler   cache.ResourceEventHandler
	signal    func() // called when a replacement has synced
	cur, next *sliceInformer
}

type sliceInformer struct {
	names   []string // the Service names selected, sorted
	factory informers.SharedInformerFactory
	synced  cache.InformerSynced
	lister  discoverylisters.EndpointSliceLister
	cancel  context.CancelFunc
}

// follow makes the watch select the Services named names (sorted, no
// duplicates): nothing if it already does or is about to, else it starts
// an informer for them, replacing a pending one. No names: no informer.
func (w *sliceWatch) follow(ctx context.Context, names []string) error {
	latest := w.cur
	if w.next != nil {
		latest = w.next
	}
	if latest != nil && slices.Equal(latest.names, names) || latest == nil && len(names) == 0 {
		return nil
	}
	if w.next != nil {
		w.next.stop()
		w.next = nil
	}
	if len(names) == 0 {
		w.cur.stop()
		w.cur = nil
		return nil
	}
	req, err := labels.NewRequirement(ServiceNameLabel, selection.In, names)
	if err != nil {
		return fmt.Errorf("peers: endpointslice selector: %w", err)
	}
	selector := labels.NewSelector().Add(*req).String()
	f := informers.NewSharedInformerFactoryWithOptions(w.client, 0, informers.WithTransform(w.transform),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	es := f.Discovery().V1().EndpointSlices()
	inf := es.Informer()
	if _, err := inf.AddEventHandler(w.handler); err != nil {
		return fmt.Errorf("peers: add event handler: %w", err)
	}
	ictx, cancel := context.WithCancel(ctx)
	si := &sliceInformer{names: names, factory: f, synced: inf.HasSynced, lister: es.Lister(), cancel: cancel}
	f.Start(ictx.Done())
	go func() {
		if cache.WaitForCacheSync(ictx.Done(), inf.HasSynced) {
			w.signal()
		}
	}()
	w.next = si
	return nil
}

// lister is the lister of the newest synced informer, nil without one. A
// pending informer that has synced replaces the current one here.
func (w *sliceWatch) lister() discoverylisters.EndpointSliceLister {
	if w.next != nil && w.next.synced() {
		w.cur.stop()
		w.cur, w.next = w.next, nil
	}
	if w.cur == nil {
		return nil
	}
	return w.cur.lister
}

// waitSynced waits for the pending informer's cache, as Run does for the
// others before the first snapshot.
func (w *sliceWatch) waitSynced(ctx context.Context) error {
	if w.next != nil && !cache.WaitForCacheSync(ctx.Done(), w.next.synced) {
		return fmt.Errorf("peers: endpointslices cache not synced: %w", ctx.Err())
	}
	return nil
}

func (w *sliceWatch) stop() {
	w.cur.stop()
	w.next.stop()
	w.cur, w.next = nil, nil
}

// stop ends the informer and waits for its goroutines; nil is a no-op.
func (s *sliceInformer) stop() {
	if s == nil {
		return
	}
	s.cancel()
	s.factory.Shutdown()
}

// serviceNames are the distinct names of the Services keyed
// namespace/name, sorted: the values of the watch's selector.
func serviceNames(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k[strings.IndexByte(k, '/')+1:])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// backends are the names of the peers (byAddr: a node peer's InternalIP
// or an agent pod's IP to its name) among the ready endpoints of the
// Service ns/name, sorted. Endpoints that are no peer are left out: the
// matrix compares a VIP's loss with its backends' direct paths by target
// name, and a name no agent probes would only shrink that comparison.
func backends(l discoverylisters.EndpointSliceLister, ns, name string, byAddr map[netip.Addr]string) []string {
	if l == nil {
		return nil
	}
	sl, _ := l.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{ServiceNameLabel: name}))
	var out []string
	for _, s := range sl {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue // FQDN slices name no peer
		}
		for _, ep := range s.Endpoints {
			if !endpointReady(ep.Conditions) {
				continue
			}
			for _, a := range ep.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil {
					if peer, ok := byAddr[ip]; ok {
						out = append(out, peer)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// endpointReady: ready and serving (unset means yes, as the API says
// consumers should read it) and not terminating. A terminating endpoint
// takes no new connections, so it is no backend of the VIP's probes.
func endpointReady(c discoveryv1.EndpointConditions) bool {
	return (c.Ready == nil || *c.Ready) && (c.Serving == nil || *c.Serving) && (c.Terminating == nil || !*c.Terminating)
}
