// Package dashtest helps tests prove prober's Grafana dashboards and alert
// rules (../*.json, ../alerts.yaml): it reads the parts of Grafana's
// dashboard model and of the rule files that tests check, and Check runs
// every dashboard query and every rule against a live Prometheus, the
// lab's or a cluster's.
package dashtest
