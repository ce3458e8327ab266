// Package agent wires the probe engines, the scheduler, the sliding
// windows, the Prometheus metrics and the HTTP endpoints into the process
// that runs on every node (`prober agent`).
//
// The agent reads its runtime Config alone: plain values (durations,
// parsed addresses, the probe engines' configs, converted targets) that
// ConfigFrom builds once from the file's config.Agent, as
// config.Matrix.MatrixConfig does for the matrix. Static targets take the
// plan's form (api.Peer) and the plan's converter (targetsFromPeers),
// which checks every Target the agent probes, HTTP/2 mode included.
package agent
