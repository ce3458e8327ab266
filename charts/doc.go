// Package charts holds prober's Helm chart (charts/prober) and, in its
// tests, the chart's checks through Helm's own Go packages: lint, schema,
// render, and deploy/daemonset.yaml kept equal to the default render
// (`make manifests`, or go generate ./charts).
package charts

//go:generate go test -run ^TestManifests$ -update .
