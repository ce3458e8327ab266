package peers

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// transform keeps only the fields discovery reads, before an object enters
// an informer's cache. A Node's status alone carries its image list and
// capacity (often 10-20 KiB); at 5,000 Nodes and 10,000 agent Pods per
// agent the full objects would cost each agent tens of MiB (measured in
// docs/performance.md).
func transform(rackLabel string) cache.TransformFunc {
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *corev1.Node:
			return slimNode(o, rackLabel), nil
		case *corev1.Pod:
			return slimPod(o), nil
		case *corev1.Service:
			return slimService(o), nil
		case *discoveryv1.EndpointSlice:
			return slimSlice(o), nil
		}
		return obj, nil // cache.DeletedFinalStateUnknown and anything else
	}
}

func slimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID,
		ResourceVersion: m.ResourceVersion, DeletionTimestamp: m.DeletionTimestamp,
	}
}

func slimNode(n *corev1.Node, rackLabel string) *corev1.Node {
	out := &corev1.Node{ObjectMeta: slimMeta(&n.ObjectMeta)}
	for _, k := range []string{ZoneLabel, rackLabel} {
		if v, ok := n.Labels[k]; ok && k != "" {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = v
		}
	}
	out.Spec.Unschedulable = n.Spec.Unschedulable
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			out.Status.Addresses = append(out.Status.Addresses, a)
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out
}

func slimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: slimMeta(&p.ObjectMeta)}
	out.Spec.NodeName = p.Spec.NodeName
	out.Status.Phase = p.Status.Phase
	out.Status.PodIP = p.Status.PodIP
	// A dual-stack pod's address of each family (podPeer reads both).
	out.Status.PodIPs = p.Status.PodIPs
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out
}

func slimService(s *corev1.Service) *corev1.Service {
	out := &corev1.Service{ObjectMeta: slimMeta(&s.ObjectMeta)}
	for _, k := range []string{ProbeAnnotation, HTTP2Annotation} {
		if v, ok := s.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	out.Spec.Type = s.Spec.Type
	out.Spec.ClusterIP = s.Spec.ClusterIP
	out.Spec.ClusterIPs = s.Spec.ClusterIPs
	for _, p := range s.Spec.Ports {
		out.Spec.Ports = append(out.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
	}
	out.Status.LoadBalancer = s.Status.LoadBalancer
	return out
}

// slimSlice keeps an EndpointSlice's Service label, address type and
// ports, and its endpoints' addresses, readiness, node and pod (the
// cluster DNS's endpoints are peers: dns.go): no topology, hints or the
// rest of the target reference.
func slimSlice(e *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{ObjectMeta: slimMeta(&e.ObjectMeta), AddressType: e.AddressType}
	if v, ok := e.Labels[ServiceNameLabel]; ok {
		out.Labels = map[string]string{ServiceNameLabel: v}
	}
	for _, p := range e.Ports {
		out.Ports = append(out.Ports, discoveryv1.EndpointPort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
	}
	out.Endpoints = make([]discoveryv1.Endpoint, len(e.Endpoints))
	for i, ep := range e.Endpoints {
		c := ep.Conditions
		out.Endpoints[i] = discoveryv1.Endpoint{Addresses: ep.Addresses, NodeName: ep.NodeName,
			Conditions: discoveryv1.EndpointConditions{Ready: c.Ready, Serving: c.Serving, Terminating: c.Terminating}}
		if r := ep.TargetRef; r != nil {
			out.Endpoints[i].TargetRef = &corev1.ObjectReference{Kind: r.Kind, Name: r.Name}
		}
	}
	return out
}
