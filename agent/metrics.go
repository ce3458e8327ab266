package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/netprober/prober/buildinfo"
	"github.com/netprober/prober/probe"
)

// metrics are the agent's Prometheus series. Labels are bounded: protocol,
// path (six classes), family (ipv4, ipv6), reason, and target (a peer name, only when
// metrics.perTarget is on, and deleted when the peer leaves). RTT
// histograms are by protocol and path only; per-pair RTT is in the
// observations API.
type metrics struct {
	perTarget bool
	sent      *prometheus.CounterVec
	lost      *prometheus.CounterVec
	rtt       *prometheus.HistogramVec
	errors    *prometheus.CounterVec
	// answerErrors counts answers that were errors (a DNS rcode), by
	// reason: probe.DNSReasons bounds it.
	answerErrors *prometheus.CounterVec
	// tooBig counts large probes (tcp_syn_mtu) the network answered
	// with "fragmentation needed" / "packet too big": path MTU discovery
	// works where they go, and the path is smaller than the interface.
	tooBig  *prometheus.CounterVec
	targets prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, perTarget bool) *metrics {
	f := promauto.With(reg)
	labels := []string{"protocol", "path", "family"}
	if perTarget {
		labels = append(labels, "target")
	}
	m := &metrics{
		perTarget: perTarget,
		sent: f.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_probes_sent_total",
			Help: "Probes that left the agent (lost or answered), by protocol, path class and target.",
		}, labels),
		lost: f.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_probes_lost_total",
			Help: "Probes with no answer before the timeout, by protocol, path class and target.",
		}, labels),
		rtt: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "prober_rtt_seconds",
			Help:    "Round-trip time of answered probes, by protocol and path class.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"protocol", "path", "family"}),
		errors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_probe_errors_total",
			Help: "Probes that could not be sent or read locally (not loss), by protocol and reason.",
		}, []string{"protocol", "reason"}),
		answerErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_probe_answer_errors_total",
			Help: "Probes the target answered with an error (a DNS SERVFAIL, NXDOMAIN, truncation, wrong ID): counted as sent, never lost; by protocol, path class and reason.",
		}, []string{"protocol", "path", "family", "reason"}),
		tooBig: f.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_pmtu_too_big_total",
			Help: "Large probes (tcp_syn_mtu) that a smaller path MTU refused and said so (ICMP fragmentation needed / packet too big): discovery works, no loss; by path class.",
		}, []string{"path", "family"}),
		targets: f.NewGauge(prometheus.GaugeOpts{
			Name: "prober_targets",
			Help: "Targets this agent probes now.",
		}),
	}
	reg.MustRegister(buildinfo.Collector())
	return m
}

// series are one (target, protocol)'s pre-resolved counters, so recording
// a result does no label lookup.
type series struct {
	sent, lost prometheus.Counter
	rtt        prometheus.Observer
	// path and family label answer errors, rare enough for a lookup.
	path, family string
}

func (m *metrics) seriesFor(proto probe.Protocol, path, family, target string) series {
	lv := []string{string(proto), path, family}
	if m.perTarget {
		lv = append(lv, target)
	}
	return series{
		sent:   m.sent.WithLabelValues(lv...),
		lost:   m.lost.WithLabelValues(lv...),
		rtt:    m.rtt.WithLabelValues(string(proto), path, family),
		path:   path,
		family: family,
	}
}

// forget deletes a departed target's series of family.
func (m *metrics) forget(target, family string) {
	if !m.perTarget {
		return
	}
	m.sent.DeletePartialMatch(prometheus.Labels{"target": target, "family": family})
	m.lost.DeletePartialMatch(prometheus.Labels{"target": target, "family": family})
}

func (m *metrics) record(s series, proto probe.Protocol, r probe.Result) {
	switch r.Outcome {
	case probe.OK, probe.Refused:
		s.sent.Inc()
		if r.RTT > 0 { // an http2_ping refusal (reset, tls) has no round trip
			s.rtt.Observe(r.RTT.Seconds())
		}
	case probe.AnswerError:
		s.sent.Inc()
		s.rtt.Observe(r.RTT.Seconds())
		m.answerErrors.WithLabelValues(string(proto), s.path, s.family, r.Reason).Inc()
	case probe.Lost:
		s.sent.Inc()
		s.lost.Inc()
	case probe.TooBig:
		s.sent.Inc()
		m.tooBig.WithLabelValues(s.path, s.family).Inc()
	case probe.LocalError:
		reason := r.Reason
		if reason == "" {
			reason = "other"
		}
		m.errors.WithLabelValues(string(proto), reason).Inc()
	}
}

// unmatchedCollector exports the engines' counters of replies that
// matched no probe, read at scrape time.
type unmatchedCollector struct {
	engines   map[probe.Protocol][]*probe.Unmatched
	unmatched *prometheus.Desc
	recvErr   *prometheus.Desc
}

// engines holds each protocol's engines, one per family: their counts
// are summed, so a dual-stack agent exports the same series.
func newUnmatchedCollector(engines map[probe.Protocol][]*probe.Unmatched) *unmatchedCollector {
	return &unmatchedCollector{
		engines: engines,
		unmatched: prometheus.NewDesc("prober_replies_unmatched_total",
			"Received packets that answered no probe in flight (late, duplicate, foreign, malformed), dropped.",
			[]string{"protocol", "reason"}, nil),
		recvErr: prometheus.NewDesc("prober_receive_errors_total",
			"Errors reading a probe socket.", []string{"protocol"}, nil),
	}
}

func (c *unmatchedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.unmatched
	ch <- c.recvErr
}

func (c *unmatchedCollector) Collect(ch chan<- prometheus.Metric) {
	for _, proto := range probe.Protocols {
		us, ok := c.engines[proto]
		if !ok {
			continue
		}
		counts := map[string]uint64{}
		var recvErrs uint64
		for _, u := range us {
			for reason, v := range u.UnmatchedCounts() {
				counts[reason] += v
			}
			recvErrs += u.RecvErrors.Load()
		}
		for reason, v := range counts {
			ch <- prometheus.MustNewConstMetric(c.unmatched, prometheus.CounterValue, float64(v), string(proto), reason)
		}
		ch <- prometheus.MustNewConstMetric(c.recvErr, prometheus.CounterValue, float64(recvErrs), string(proto))
	}
}
