// Package httpguard bounds what clients can hold of an HTTP server: the
// connections from one source and in all (the quietest idle one evicted
// at the cap, never a wait in Accept), the requests in flight from one
// source and in all, with every source's first request always served, so
// a flood from one client never starves a kubelet's probe, a Prometheus
// scrape or an operator's page; and quiet connections closed. The agent's
// and the matrix's servers are both behind one.
package httpguard
