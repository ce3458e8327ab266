// Package config loads prober's YAML configuration files: strictly (unknown
// and duplicate keys are errors), then SetDefaults, then Validate, which
// reports every problem at once, each naming the field.
//
// config builds the runtime packages' configs from a file (MatrixConfig,
// TCPSYNConfig, TraceConfig, HTTP2Config), and the ranges of those are
// the runtime packages' own: Validate runs matrix.Config.Check and probe's
// Check methods on what it built, mapping their field names to the file's.
// So --check and a start, which runs the same checks (agent.Check,
// hub.Check), agree on every field; TestCheckAndStartAgree holds them to
// it. Policies of the agent and the matrix process alone (intervals, the
// trace budget, the 4096 reserved ports) are checked here only.
//
// The agent's runtime config (agent.Config) is built once, by
// agent.ConfigFrom, from an Agent and these builders: agent imports
// config, never the reverse, so the matrix's side (hub) does not pull in
// the agent.
package config
