// Package api holds the JSON wire types that agents serve on
// /api/v1/observations and that the matrix pulls. It imports only the
// standard library so that every side of the data flow (agent, matrix,
// lab, tests) can share one definition of the schema; docs/api.md
// describes it for people.
package api
