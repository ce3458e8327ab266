// Package tracereport turns the flow traces of one target into the report
// `prober trace` prints and the matrix's page shows when an operator
// traces a cell on demand: the flows grouped by path, the hops where a
// lossy flow's break starts, and the suspects the matrix's localization
// names from the flows alone. One report for both, so a person reads the
// same thing at a shell and on the page (docs/trace.md).
package tracereport
