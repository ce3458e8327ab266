// Package dashboards holds prober's Grafana dashboards (*.json, the source
// of truth, edited in Grafana or by hand) and the tests that prove them and
// the alert rules (alerts.yaml) against a real
// Prometheus scraping real agents and a real matrix.
//
// The Kubernetes manifests that carry them, ../deploy/grafana-dashboards.yaml
// and ../deploy/optional/prometheus-rules.yaml, and the copies in the chart
// and the mixin (../charts/prober/files, ../mixin) are generated: run `go
// generate ./dashboards` after editing a dashboard or a rule. A test fails while a
// manifest differs from what its sources generate.
package dashboards

//go:generate go test -run ^TestGenerated$ -update .
