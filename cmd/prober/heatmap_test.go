package main

import (
	"strings"
	"testing"

	"github.com/netprober/prober/matrix"
)

// TestHeatmapFamilies: a dual-stack snapshot draws one grid per family,
// each with its own loss, where one grid would have shown whichever cell
// came last; a single-stack one draws one grid, as before.
func TestHeatmapFamilies(t *testing.T) {
	t.Parallel()
	cell := func(fam string, lost uint64) matrix.Cell {
		return matrix.Cell{Source: "r1", Target: "r2", Path: "node_to_node", Protocol: "tcp_syn", Family: fam,
			Sent: 1000, Lost: lost, LossRatio: float64(lost) / 1000}
	}
	var b strings.Builder
	drawHeatmap(&b, matrix.Snapshot{Groups: []matrix.Cell{cell("ipv6", 50), cell("ipv4", 0)}}, "node_to_node", "tcp_syn", false)
	out := b.String()
	v4 := strings.Index(out, "node_to_node, tcp_syn, ipv4:")
	v6 := strings.Index(out, "node_to_node, tcp_syn, ipv6:")
	if v4 < 0 || v6 < v4 || !strings.Contains(out[v4:v6], " . ") || !strings.Contains(out[v6:], "5.0") {
		t.Errorf("dual-stack heatmap, want an ipv4 grid without loss and an ipv6 grid at 5%%:\n%s", out)
	}
	b.Reset()
	drawHeatmap(&b, matrix.Snapshot{Groups: []matrix.Cell{cell("ipv4", 20)}}, "node_to_node", "tcp_syn", false)
	if out := b.String(); !strings.Contains(out, "node_to_node, tcp_syn: loss") || !strings.Contains(out, "2.0") {
		t.Errorf("single-stack heatmap:\n%s", out)
	}
}
