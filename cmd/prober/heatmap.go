package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/netprober/prober/matrix"
)

// isTerminal reports whether w is a character device (colour on).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// drawHeatmap prints the snapshot's cells of one path class and protocol
// as a source x target grid, one per address family on a dual-stack
// cluster: loss in percent, "." for none, blank for no data; with colour,
// a green-to-red background.
func drawHeatmap(w io.Writer, snap matrix.Snapshot, path, proto string, color bool) {
	var fams []string
	for _, c := range snap.Groups {
		if c.Path == path && c.Protocol == proto && !slices.Contains(fams, c.Family) {
			fams = append(fams, c.Family)
		}
	}
	slices.Sort(fams)
	if len(fams) < 2 {
		drawGrid(w, snap, path, proto, "", color)
		return
	}
	for _, f := range fams {
		drawGrid(w, snap, path, proto, f, color)
	}
}

// drawGrid draws the cells of family, or of every family when "".
func drawGrid(w io.Writer, snap matrix.Snapshot, path, proto, family string, color bool) {
	type key struct{ s, t string }
	cells := map[key]matrix.Cell{}
	var rows, cols []string
	for _, c := range snap.Groups {
		if c.Path != path || c.Protocol != proto || family != "" && c.Family != family {
			continue
		}
		cells[key{c.Source, c.Target}] = c
		rows = append(rows, c.Source)
		cols = append(cols, c.Target)
	}
	slices.Sort(rows)
	slices.Sort(cols)
	rows, cols = slices.Compact(rows), slices.Compact(cols)
	title := path + ", " + proto
	if family != "" {
		title += ", " + family
	}
	fmt.Fprintf(w, "    %s: loss by source (rows) and target (columns)\n", title)
	if len(rows) == 0 {
		fmt.Fprintln(w, "    (no data yet)")
		return
	}
	const width = 6
	fmt.Fprintf(w, "    %-8s", "")
	for _, c := range cols {
		fmt.Fprintf(w, "%*s", width, trim(c, width-1))
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "    %-8s", trim(r, 8))
		for _, c := range cols {
			cell, ok := cells[key{r, c}]
			text := ""
			switch {
			case !ok || cell.Sent == 0:
			case cell.Lost == 0:
				text = "."
			case cell.LossRatio < 0.0995:
				text = fmt.Sprintf("%.1f", 100*cell.LossRatio)
			default:
				text = fmt.Sprintf("%.0f", 100*cell.LossRatio)
			}
			if color && ok && cell.Sent > 0 {
				fmt.Fprintf(w, "\x1b[%sm%*s\x1b[0m", ansiColor(cell.LossRatio), width, text+" ")
			} else {
				fmt.Fprintf(w, "%*s", width, text+" ")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "    (percent lost in the window; . none)")
}

// ansiColor maps a loss ratio to a background: green, yellow, orange, red.
func ansiColor(r float64) string {
	switch {
	case r == 0:
		return "30;42"
	case r < 0.005:
		return "30;43"
	case r < 0.02:
		return "30;48;5;208"
	}
	return "97;41"
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// printDiagnosis prints the suspects as a table.
func printDiagnosis(w io.Writer, d matrix.Diagnosis) {
	if len(d.Suspects) == 0 {
		fmt.Fprintln(w, "    suspects: none")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    kind\tname\tscore\test. loss/delay\tevidence")
	for _, s := range d.Suspects {
		name := s.Name
		if s.Family != "" {
			name += " (" + s.Family + " only)"
		}
		est := fmt.Sprintf("%.1f%%", 100*s.EstimatedLoss)
		if s.Kind == matrix.KindLatency {
			est = fmt.Sprintf("+%.1f ms", 1e3*s.AddedDelay)
		}
		fmt.Fprintf(tw, "    %s\t%s\t%.2f\t%s\t%s\n", s.Kind, name, s.Score, est, strings.TrimSpace(s.Evidence.Detail))
	}
	tw.Flush()
}
