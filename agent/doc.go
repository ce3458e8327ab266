// Package agent wires the probe engines, the scheduler, the sliding
// windows, the Prometheus metrics and the HTTP endpoints into the process
// that runs on every node (`prober agent`).
package agent
