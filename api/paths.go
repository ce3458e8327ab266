package api

// The URL paths of prober's HTTP API, every one: an agent serves the
// first two, the matrix process the rest. Servers, clients and tests
// read them here.
const (
	// ObservationsPath is where every agent serves its Observations.
	ObservationsPath = "/api/v1/observations"
	// TracePath traces on demand. On an agent, POST ?target=NAME&
	// family=ipv4|ipv6 traces a target's tcp_syn flows and answers a
	// TraceResult (docs/agent.md); the matrix asks it when an operator
	// traces a cell of its page. On the matrix, POST ?source=&target=&
	// path=&family= traces a cell's pair through its source's agent.
	// On both, &large=1 traces with the flows' large probes
	// (TraceLarge): where a path MTU black hole ends them.
	TracePath = "/api/v1/trace"
	// TraceLarge is the query key, set to 1, asking TracePath to pad each
	// probe to the size of the target's large probes (probing.pmtu).
	TraceLarge = "large"
	// TraceHeader must be set (to anything) on a POST to TracePath, on
	// the matrix and on an agent: a cross-site form or no-cors fetch
	// cannot set a header, so a foreign page open in an operator's
	// browser cannot make either trace.
	TraceHeader = "X-Prober-Trace"

	// PlanPath is every agent's plan, for operators: who probes whom.
	// ?node=NAME narrows it to that node's agents and adds who probes
	// them.
	PlanPath = "/api/v1/plan"
	// AgentPlanPath + NAME is one agent's plan, long-polled by the agent:
	// ?version=V answers at once when the plan is no longer V, else when
	// it changes or after ?wait (at most MaxPlanWait).
	AgentPlanPath = "/api/v1/plan/agents/"
	// MatrixPath is the loss matrix: the latest round's cells and agents.
	// ?node=NAME narrows it to that node's agents and the cells from or
	// to them.
	MatrixPath = "/api/v1/matrix"
	// DiagnosisPath is the latest round's suspects.
	DiagnosisPath = "/api/v1/diagnosis"
	// FabricPath is the topology the matrix traced.
	FabricPath = "/api/v1/fabric"
	// FabricCellsPath?device=NAME lists the cells whose flows cross a
	// device or a link "from->to".
	FabricCellsPath = "/api/v1/fabric/cells"
	// HistoryPath is every suspect of the last hour, with its scores.
	HistoryPath = "/api/v1/history"
)
