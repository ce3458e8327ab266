// Package matrix turns every agent's observations into one loss matrix and
// names what drops packets: a switch, a link, the load balancer, a host or
// the pod dataplane.
//
// It is pure: it imports only the standard library and package api, does
// no I/O, reads no clock (callers pass time.Time) and is deterministic
// (every map iteration is sorted), so two replicas of `prober matrix` fed
// the same observations compute byte-identical answers.
//
// A Matrix keeps each agent's latest report (Observe), rolls them up by a
// label (Snapshot) and localizes loss in stages (Localize): Pingmesh tier
// scoring, 007 voting over traced flow paths, a NetBouncer-style estimator
// over all flows, and rules for what is not the fabric (lb, host,
// dataplane). A host's rack, which the tier stage, the host rule and
// GroupBy rack need, is its rack label or else the rack its agent's first
// hop names (Racks). docs/localization.md explains the stages and
// thresholds.
//
// A Matrix is not safe for concurrent use; the process wiring serialises
// Observe, Snapshot and Localize behind one mutex.
package matrix
