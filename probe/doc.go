// Package probe implements prober's probe engines: ICMP echo, TCP SYN
// half-open, HTTP/2 PING and the Paris-style TCP SYN traceroute, over IPv4
// or IPv6 (an engine is single-family, by its source address). It knows
// nothing of Prometheus, Kubernetes or configuration files: engines take
// Targets and return Results.
package probe
