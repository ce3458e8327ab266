// Package peers discovers what an agent probes: in a cluster, the Nodes,
// the prober agent Pods of both DaemonSets and the load balancers (the
// kubernetes Service, the API server's external address and opted-in
// Services) with their backends among those peers (from the probed
// Services' EndpointSlices), watched through client-go shared informers.
//
// It is the only package of prober that imports k8s.io/*. Discovery never
// polls: after one list per resource it follows watches, so an agent's load
// on the API server is constant whatever it probes and however often (seed
// 003: a monitor's own requests once overloaded an API server). Informer
// handlers only signal a change; changes are coalesced and turned into a
// sorted, deterministic []Peer snapshot built from the informers' caches.
//
// It also holds the one way an operator's tools reach the matrix from
// outside the cluster: DialMatrix, a port-forward to the matrix pod with
// the user's kubeconfig (kubectl prober).
package peers
