package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/cmd/internal/cli"
	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/testbed"
)

// runLabDemo is `prober lab demo`: the default fabric, an agent on every
// node and in every pod, the matrix; a healthy matrix, then seed 004's
// fault (a lossy spine), the matrix again and the diagnosis naming it.
// The fabric is testbed's; what is printed around it is here.
func runLabDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("prober lab demo", "[--device spine2] [--permille N] [--listen ADDR] [--keep]", stderr)
	device := fs.String("device", "spine2", "the device to make lossy")
	permille := fs.Int("permille", 50, "random loss on the device, per mille of what it forwards")
	listen := fs.String("listen", "127.0.0.1:9809", "the matrix page's address while the demo runs")
	window := fs.Duration("window", 20*time.Second, "the agents' sliding window")
	within := fs.Duration("within", 90*time.Second, "how long to wait for the diagnosis")
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code
	}
	if *permille < 1 || *permille > 1000 || *window < 5*time.Second || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "prober lab demo: --permille must be 1..1000 and --window at least 5s; no arguments")
		return cli.ExitUsage
	}
	if err := lab.NeedNetAdmin(); err != nil {
		fmt.Fprintf(stderr, "prober lab demo: %v\n", err)
		return cli.ExitRuntime
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "prober lab demo: %v\n", err)
		return cli.ExitRuntime
	}
	spec := lab.DefaultSpec()
	spec.Prefix = "pdemo"
	s := testbed.FabricSpec{Lab: spec, Prober: testbed.Prober{Path: exe}, Interval: 500 * time.Millisecond, Window: *window,
		Listen: *listen, Out: stdout, TTY: isTerminal(stdout)}
	fault := lab.Fault{Kind: lab.FaultDeviceLoss, Device: *device, Permille: *permille}
	if err := labDemo(ctx, s, fault, *within); err != nil {
		fmt.Fprintf(stderr, "prober lab demo: %v\n", err)
		return cli.ExitRuntime
	}
	return cli.ExitOK
}

// labDemo runs the demo on the fabric s describes; a terminal (s.TTY)
// gets the heatmap in colour.
func labDemo(ctx context.Context, s testbed.FabricSpec, fault lab.Fault, within time.Duration) (err error) {
	out := s.Out
	r, err := testbed.StartFabric(ctx, s)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := r.Close(); err == nil {
			err = cerr
		}
	}()
	if err := r.Lab().Check(fault); err != nil {
		return err
	}
	fmt.Fprintf(out, "==> healthy fabric: filling the agents' %s windows\n", s.Window)
	if err := r.WaitFilled(ctx); err != nil {
		return err
	}
	drawHeatmap(out, r.Snapshot(), api.PathNodeToNode, api.ProtocolTCPSYN, s.TTY)
	printDiagnosis(out, r.Diagnosis())

	fmt.Fprintf(out, "==> injecting seed 004's fault: %s (nftables in %s-%s)\n", fault, s.Lab.Prefix, fault.Device)
	injected := time.Now()
	if err := r.Lab().Inject(ctx, fault); err != nil {
		return err
	}
	// Named alone: an innocent listed beside it would send someone to the
	// wrong switch.
	_, err = r.WaitFor(ctx, within, "the matrix to name "+fault.Device+" and nothing else", func(d matrix.Diagnosis, _ matrix.Snapshot) bool {
		l := d.Listed()
		return len(l) == 1 && l[0].Name == fault.Device
	})
	drawHeatmap(out, r.Snapshot(), api.PathNodeToNode, api.ProtocolTCPSYN, s.TTY)
	printDiagnosis(out, r.Diagnosis())
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "==> %s named in %.0fs after the fault; seed 004's engineer looped traceroute for 90 s to see the layer, not the device\n",
		fault.Device, time.Since(injected).Seconds())
	return r.Lab().Clear(ctx)
}
