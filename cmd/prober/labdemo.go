package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/matrix"
)

// runLabDemo is `prober lab demo`: the default fabric, an agent on every
// node and in every pod, the matrix; a healthy matrix, then seed 004's
// fault (a lossy spine), the matrix again and the diagnosis naming it.
func runLabDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("lab demo", "[--device spine2] [--permille N] [--listen ADDR] [--keep]", stderr)
	device := fs.String("device", "spine2", "the device to make lossy")
	permille := fs.Int("permille", 50, "random loss on the device, per mille of what it forwards")
	listen := fs.String("listen", "127.0.0.1:9809", "the matrix page's address while the demo runs")
	window := fs.Duration("window", 20*time.Second, "the agents' sliding window")
	within := fs.Duration("within", 90*time.Second, "how long to wait for the diagnosis")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if *permille < 1 || *permille > 1000 || *window < 5*time.Second || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "prober lab demo: --permille must be 1..1000 and --window at least 5s; no arguments")
		return exitUsage
	}
	if err := lab.NeedNetAdmin(); err != nil {
		fmt.Fprintf(stderr, "prober lab demo: %v\n", err)
		return exitRuntime
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "prober lab demo: %v\n", err)
		return exitRuntime
	}
	spec := lab.DefaultSpec()
	spec.Prefix = "pdemo"
	o := fabricOptions{exe: exe, spec: spec, interval: 500 * time.Millisecond, window: *window, listen: *listen, out: stdout}
	fault := lab.Fault{Kind: lab.FaultDeviceLoss, Device: *device, Permille: *permille}
	if err := labDemo(ctx, o, fault, *within, isTerminal(stdout)); err != nil {
		fmt.Fprintf(stderr, "prober lab demo: %v\n", err)
		return exitRuntime
	}
	return exitOK
}

func labDemo(ctx context.Context, o fabricOptions, fault lab.Fault, within time.Duration, color bool) (err error) {
	out := o.out
	r, err := startFabric(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := r.close(); err == nil {
			err = cerr
		}
	}()
	if err := r.f.Check(fault); err != nil {
		return err
	}
	fmt.Fprintf(out, "==> healthy fabric: filling the agents' %s windows\n", o.window)
	filled := func(_ matrix.Diagnosis, s matrix.Snapshot) bool {
		return len(s.Groups) > 0 && time.Since(s.Time) < 5*time.Second && s.Time.Sub(r.startedAt()) > o.window
	}
	if _, err := r.waitFor(ctx, o.window+30*time.Second, "a full window", filled); err != nil {
		return err
	}
	drawHeatmap(out, r.snapshot(), "node_to_node", "tcp_syn", color)
	printDiagnosis(out, r.diagnosis())

	fmt.Fprintf(out, "==> injecting seed 004's fault: %s (nftables in %s-%s)\n", fault, o.spec.Prefix, fault.Device)
	injected := time.Now()
	if err := r.f.Inject(ctx, fault); err != nil {
		return err
	}
	_, err = r.waitFor(ctx, within, "the matrix to name "+fault.Device, func(d matrix.Diagnosis, _ matrix.Snapshot) bool {
		return len(d.Suspects) > 0 && d.Suspects[0].Name == fault.Device
	})
	drawHeatmap(out, r.snapshot(), "node_to_node", "tcp_syn", color)
	printDiagnosis(out, r.diagnosis())
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "==> %s named in %.0fs after the fault; seed 004's engineer looped traceroute for 90 s to see the layer, not the device\n",
		fault.Device, time.Since(injected).Seconds())
	return r.f.Clear(ctx)
}
