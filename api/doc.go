// Package api owns prober's wire contract: every type an endpoint serves
// or reads (an agent's observations and traces, the plan, the matrix's
// snapshot, diagnosis, fabric and pairs, a trace's report and verdict),
// every URL path, the label keys and the HTTP/2 modes. The matrix
// computes these types but declares none. It imports only the standard
// library so that every side of the data flow (agent, matrix, hub, lab,
// tests) shares one definition of the schema; docs/api.md describes it
// for people.
package api
