package hub

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/buildinfo"
)

type hubMetrics struct {
	rounds       prometheus.Counter
	roundSeconds prometheus.Histogram
	pullErrors   *prometheus.CounterVec
	unplanned    prometheus.Counter
	authFailures *prometheus.CounterVec
	planAgents   prometheus.Gauge
	planBuilds   prometheus.Counter
}

func newHubMetrics(reg prometheus.Registerer, h *Hub) *hubMetrics {
	f := promauto.With(reg)
	m := &hubMetrics{
		rounds: f.NewCounter(prometheus.CounterOpts{
			Name: "prober_matrix_rounds_total",
			Help: "Rounds of pulling every agent and recomputing the matrix.",
		}),
		roundSeconds: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "prober_matrix_round_duration_seconds",
			Help:    "Wall time of one round: pulls, matrix and localization.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
		authFailures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_matrix_agent_auth_failures_total",
			Help: "Agents' plan requests refused by reason (no_token, invalid, serviceaccount, pod): an agent without a valid token for its pod gets no plan and is not pulled.",
		}, []string{"reason"}),
		pullErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_matrix_pull_errors_total",
			Help: "Failed pulls of an agent's observations by reason (timeout, connect, http, decode, invalid, identity): no data, not loss.",
		}, []string{"reason"}),
		unplanned: f.NewCounter(prometheus.CounterOpts{
			Name: "prober_matrix_unplanned_targets_total",
			Help: "Targets dropped from agents' reports because the plan has no such target at that address (Kubernetes mode): a peer that has left, or an agent that is broken or lying.",
		}),
		planAgents: f.NewGauge(prometheus.GaugeOpts{
			Name: "prober_matrix_plan_agents",
			Help: "Agents in the probe plan the matrix serves.",
		}),
		planBuilds: f.NewCounter(prometheus.CounterOpts{
			Name: "prober_matrix_plan_builds_total",
			Help: "Rebuilds of the probe plan: discovery changes, inferred racks, rotation rounds.",
		}),
	}
	reg.MustRegister(buildinfo.Collector())
	reg.MustRegister(&snapshotCollector{h: h,
		loss: prometheus.NewDesc("prober_matrix_loss_ratio",
			"Window loss ratio from source to target (groups by groupBy) over a path class and protocol.",
			[]string{"source", "target", "path", "protocol", "family"}, nil),
		sent: prometheus.NewDesc("prober_matrix_probes",
			"Probes behind prober_matrix_loss_ratio in the agents' windows.",
			[]string{"source", "target", "path", "protocol", "family"}, nil),
		notAnswering: prometheus.NewDesc("prober_matrix_not_answering",
			"Source-target pairs behind a cell whose target does not answer the protocol (ICMP echo a firewall or security group drops): no data, not loss.",
			[]string{"source", "target", "path", "protocol", "family"}, nil),
		suspect: prometheus.NewDesc("prober_suspect",
			"A device, link, LB, host, tier or dataplane suspected of dropping packets (kind pmtu: large ones; kind latency: of delaying them); the value is its score (0-1). family is set when it drops one address family only.",
			[]string{"kind", "name", "family"}, nil),
		suspectLoss: prometheus.NewDesc("prober_suspect_estimated_loss_ratio",
			"The loss ratio a suspect itself is estimated to cause.",
			[]string{"kind", "name", "family"}, nil),
		suspectDelay: prometheus.NewDesc("prober_suspect_added_delay_seconds",
			"The round-trip delay a latency suspect adds: the median of its slow flows' round trips above the round's fastest flow.",
			[]string{"kind", "name", "family"}, nil),
		disputed: prometheus.NewDesc("prober_disputed",
			"A link or rack's uplinks the matrix would have named but refused: fewer of the agents whose flows cross it blame it than see it clean (a lying or broken agent). The value is the agents that blame it.",
			[]string{"kind", "name", "family"}, nil),
		agents: prometheus.NewDesc("prober_matrix_agents",
			"Configured agents by the state of their latest pull: reporting or missing.",
			[]string{"state"}, nil),
	})
	return m
}

// snapshotCollector exports the latest snapshot and diagnosis as const
// metrics: the series follow the matrix, with no stale series to delete.
type snapshotCollector struct {
	h                                                                              *Hub
	loss, sent, notAnswering, suspect, suspectLoss, suspectDelay, disputed, agents *prometheus.Desc
}

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.loss, c.sent, c.notAnswering, c.suspect, c.suspectLoss, c.suspectDelay, c.disputed, c.agents} {
		ch <- d
	}
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.h
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cell := range h.snap.Groups {
		ch <- prometheus.MustNewConstMetric(c.loss, prometheus.GaugeValue, cell.LossRatio, cell.Source, cell.Target, cell.Path, cell.Protocol, cell.Family)
		ch <- prometheus.MustNewConstMetric(c.sent, prometheus.GaugeValue, float64(cell.Sent), cell.Source, cell.Target, cell.Path, cell.Protocol, cell.Family)
		if cell.NotAnswering > 0 {
			ch <- prometheus.MustNewConstMetric(c.notAnswering, prometheus.GaugeValue, float64(cell.NotAnswering), cell.Source, cell.Target, cell.Path, cell.Protocol, cell.Family)
		}
	}
	seen := map[[3]string]bool{}
	for _, s := range h.diag.Suspects {
		k := [3]string{s.Kind, s.Name, s.Family}
		if seen[k] { // never emit a duplicate series, whatever Localize returns
			continue
		}
		seen[k] = true
		ch <- prometheus.MustNewConstMetric(c.suspect, prometheus.GaugeValue, s.Score, s.Kind, s.Name, s.Family)
		ch <- prometheus.MustNewConstMetric(c.suspectLoss, prometheus.GaugeValue, s.EstimatedLoss, s.Kind, s.Name, s.Family)
		if s.Kind == api.KindLatency {
			ch <- prometheus.MustNewConstMetric(c.suspectDelay, prometheus.GaugeValue, s.AddedDelay, s.Kind, s.Name, s.Family)
		}
	}
	for _, d := range h.diag.Disputed {
		k := [3]string{"disputed/" + d.Kind, d.Name, d.Family}
		if seen[k] {
			continue
		}
		seen[k] = true
		ch <- prometheus.MustNewConstMetric(c.disputed, prometheus.GaugeValue, float64(d.Confirming), d.Kind, d.Name, d.Family)
	}
	var reporting, missing float64
	for _, u := range h.agents {
		if p := h.pulls[u]; p != nil && p.OK {
			reporting++
		} else {
			missing++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.agents, prometheus.GaugeValue, reporting, "reporting")
	ch <- prometheus.MustNewConstMetric(c.agents, prometheus.GaugeValue, missing, "missing")
}

// kubeWritesCollector exports the matrix's own writes to the API server
// (kubernetes.nodeConditions) and what its bound holds back: a monitor
// must show its own load (seed 003).
type kubeWritesCollector struct {
	writes      func(visit func(object, result string, n uint64)) int
	total, held *prometheus.Desc
}

func newKubeWritesCollector(writes func(visit func(object, result string, n uint64)) int) *kubeWritesCollector {
	return &kubeWritesCollector{writes: writes,
		total: prometheus.NewDesc("prober_matrix_kube_writes_total",
			"Writes the matrix made to the API server (kubernetes.nodeConditions) by object (node_condition: a Node's status patch; event) and result (ok, error).",
			[]string{"object", "result"}, nil),
		held: prometheus.NewDesc("prober_matrix_kube_writes_held",
			"Changes (a Node's condition, an Event) the writesPerMinute bound holds back now; they wait, surest first.",
			nil, nil),
	}
}

func (c *kubeWritesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.total
	ch <- c.held
}

func (c *kubeWritesCollector) Collect(ch chan<- prometheus.Metric) {
	held := c.writes(func(object, result string, n uint64) {
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(n), object, result)
	})
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(held))
}
