// prober's monitoring mixin, for kube-prometheus and every tool that takes
// mixins: the alerts and dashboards the chart and deploy/ ship, read from
// the copies `go generate ./dashboards` writes here (dashboards/ is their
// one source), so that a jsonnet-bundler vendoring of this directory alone
// is whole.
//
//   local prober = (import 'github.com/netprober/prober/mixin/mixin.libsonnet') + {
//     _config+:: { runbookURL: 'https://wiki.example.com/prober-runbook' },
//   };
//   { alerts: prober.prometheusAlerts, dashboards: prober.grafanaDashboards }
{
  _config+:: {
    // Where the alerts' runbook_url points; each keeps its #anchor.
    runbookURL: 'https://github.com/netprober/prober/blob/main/docs/runbook.md',
    // Severity by alert name, over the shipped ones (warning or critical).
    alertSeverity: {},
  },

  local shippedRunbook = 'https://github.com/netprober/prober/blob/main/docs/runbook.md',
  local config = self._config,
  local rebase(u) = if std.startsWith(u, shippedRunbook) then config.runbookURL + u[std.length(shippedRunbook):] else u,
  local rule(r) =
    if std.objectHas(r, 'alert') then
      r {
        labels+: if std.objectHas(config.alertSeverity, r.alert) then { severity: config.alertSeverity[r.alert] } else {},
        annotations+: if std.objectHas(r, 'annotations') && std.objectHas(r.annotations, 'runbook_url') then {
          runbook_url: rebase(r.annotations.runbook_url),
        } else {},
      }
    else r,

  prometheusAlerts+:: {
    local shipped = std.parseYaml(importstr 'alerts.yaml'),
    local names = [r.alert for g in shipped.groups for r in g.rules if std.objectHas(r, 'alert')],
    local unknown = [a for a in std.objectFields(config.alertSeverity) if !std.member(names, a)],
    assert unknown == [] : '_config.alertSeverity names alerts the mixin does not have: %s' % std.join(', ', unknown),
    groups+: [
      g { rules: std.map(rule, g.rules) }
      for g in shipped.groups
    ],
  },

  grafanaDashboards+:: {
    'prober-overview.json': import 'dashboards/prober-overview.json',
    'prober-node.json': import 'dashboards/prober-node.json',
  },
}
