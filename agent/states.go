package agent

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netprober/prober/probe"
)

// stateCollector exports one 0/1 state of every target at scrape time
// (prober_established_flow_blackhole, prober_icmp_not_answering): a
// departed target's series goes with it. Without per-target labels a
// path class's value is the max of its targets' (any), or with sum their
// count.
type stateCollector struct {
	a         *Agent
	perTarget bool
	sum       bool
	desc      *prometheus.Desc
	// state is t's value, ok false for a target without the state.
	// Called with t.mu held.
	state func(t *target, now time.Time) (v bool, ok bool)
}

func newStateCollector(a *Agent, perTarget, sum bool, name, help string, state func(*target, time.Time) (bool, bool)) *stateCollector {
	labels := []string{"path", "family"}
	if perTarget {
		labels = append(labels, "target")
	}
	return &stateCollector{a: a, perTarget: perTarget, sum: sum, state: state, desc: prometheus.NewDesc(name, help, labels, nil)}
}

// newNotAnsweringCollector exports which targets do not answer ICMP echo
// (target.notAnswering): no data, not loss, so an operator sees why
// their icmp cells are empty.
func newNotAnsweringCollector(a *Agent, perTarget bool) *stateCollector {
	span := a.cfg.Window
	return newStateCollector(a, perTarget, true, "prober_icmp_not_answering",
		"1 while a target does not answer ICMP echo (a firewall or security group drops it) and its echoes count as no data, not loss; without per-target labels, the number of such targets.",
		func(t *target, _ time.Time) (bool, bool) {
			_, ok := t.protos[probe.ProtocolICMP]
			return ok && t.notAnswering(span), ok
		})
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.a.now()
	c.a.mu.Lock()
	ts := make([]*target, 0, len(c.a.targets))
	for _, t := range c.a.targets {
		ts = append(ts, t)
	}
	c.a.mu.Unlock()
	type pathFamily struct{ path, family string }
	byPath := map[pathFamily]float64{}
	for _, t := range ts {
		t.mu.Lock()
		on, ok := c.state(t, now)
		t.mu.Unlock()
		if !ok {
			continue
		}
		v := 0.0
		if on {
			v = 1
		}
		if c.perTarget {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, t.path, t.Family(), t.Name)
			continue
		}
		k := pathFamily{t.path, t.Family()}
		if c.sum {
			byPath[k] += v
		} else {
			byPath[k] = max(byPath[k], v)
		}
	}
	for k, v := range byPath {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, k.path, k.family)
	}
}
