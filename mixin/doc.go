// Package mixin holds prober's monitoring mixin (mixin.libsonnet:
// prometheusAlerts, grafanaDashboards, _config) and, in its tests, its
// evaluation with go-jsonnet checked equal to the alerts and dashboards
// the chart ships. alerts.yaml and dashboards/*.json here are copies
// written by `go generate ./dashboards`; edit dashboards/, never them.
package mixin
