// Package hub is the `prober matrix` process: it pulls every agent's
// /api/v1/observations each interval, with timeouts and bounded
// concurrency, feeds them to the pure matrix package, and serves the loss
// matrix, the diagnosis, Prometheus metrics and an HTML page. A slow or
// missing agent is "no data", never loss.
package hub
