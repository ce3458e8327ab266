package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/cmd/internal/cli"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/probe"
	"github.com/netprober/prober/tracereport"
)

const traceSynopsis = "[-4|-6] [--flows N] [--port P] [--probes K] [--max-ttl T] [--size BYTES] [--json] [--source ADDR] [--matrix-config FILE] HOST"

// traceFlags names the flag of each probe.TraceConfig field that has one.
var traceFlags = map[string]string{"maxTTL": "max-ttl", "concurrency": "flows"}

// runTrace is `prober trace`: a one-shot multipath TCP SYN traceroute.
func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("prober trace", traceSynopsis, stderr)
	flows := fs.Int("flows", 16, "flows (source ports) to trace, 1..256")
	port := fs.Int("port", 80, "destination TCP port")
	probes := fs.Int("probes", probe.DefaultTraceProbes, "probes per hop and flow, 1..100")
	maxTTL := fs.Int("max-ttl", probe.DefaultTraceMaxTTL, "last TTL tried, 1..64")
	retries := fs.Int("retries", probe.DefaultTraceRetries, "at most this many extra rounds, a second apart, for hops still in doubt (routers rate-limit ICMP); a flow stops once none is")
	rate := fs.Float64("rate", probe.DefaultTraceRate, "probes per second, all flows together")
	timeout := fs.Duration("timeout", probe.DefaultTraceTimeout, "how long an answer may take")
	size := fs.Int("size", 0, "pad each probe to this many bytes of IP packet, Don't Fragment (0: bare SYNs): flows end at the last hop a packet of that size reaches, where a path MTU black hole drops it; at most the first hop's MTU")
	asJSON := fs.Bool("json", false, "print one JSON object")
	source := fs.String("source", "", "source address (default: the one routing picks for HOST)")
	sportBase := fs.Int("sport-base", 64000, "first source port to reserve; ports in use are skipped")
	only4 := fs.Bool("4", false, "trace over IPv4: resolve HOST to its IPv4 address")
	only6 := fs.Bool("6", false, "trace over IPv6: resolve HOST to its IPv6 address")
	matrixConfig := fs.String("matrix-config", "", "the matrix's config file: its device names (hops) and thresholds name the suspects inferred from the flows")
	hosts, code := cli.ParseInterspersed(fs, args)
	if code >= 0 {
		return code
	}
	var errs []string
	if len(hosts) != 1 {
		errs = append(errs, "exactly one HOST is required")
	}
	if *flows < 1 || *flows > 256 {
		errs = append(errs, fmt.Sprintf("--flows: %d not in 1..256", *flows))
	}
	if *port < 1 || *port > 65535 {
		errs = append(errs, fmt.Sprintf("--port: %d not in 1..65535", *port))
	}
	if *sportBase < 1024 || *sportBase+2*(*flows) > 65536 {
		errs = append(errs, fmt.Sprintf("--sport-base: %d leaves no room for %d source ports below 65536", *sportBase, *flows))
	}
	if *probes < 1 || *maxTTL < 1 || *rate <= 0 || *timeout <= 0 {
		errs = append(errs, "--probes, --max-ttl, --rate and --timeout must be positive")
	}
	cfg := probe.TraceConfig{MaxTTL: *maxTTL, Probes: *probes, Retries: *retries, Rate: *rate, Timeout: *timeout, Concurrency: *flows, Size: *size}
	cfg.SetDefaults()
	cfg.Check(func(field, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("--%s: %s", cmp.Or(traceFlags[field], field), fmt.Sprintf(format, args...)))
	})
	family := ""
	switch {
	case *only4 && *only6:
		errs = append(errs, "-4 and -6: pick one family")
	case *only4:
		family = api.FamilyIPv4
	case *only6:
		family = api.FamilyIPv6
	}
	var src netip.Addr
	if *source != "" {
		a, err := netip.ParseAddr(*source)
		switch {
		case err != nil || a.Zone() != "" || a.IsUnspecified():
			errs = append(errs, fmt.Sprintf("--source: %q is not a unicast IP address", *source))
		case family != "" && api.FamilyOf(a) != family:
			errs = append(errs, fmt.Sprintf("--source: %s is not %s", a, family))
		default:
			src = a.Unmap()
			family = api.FamilyOf(src) // HOST is resolved in the source's family
		}
	}
	mcfg := matrix.Config{}
	if *matrixConfig != "" {
		c, err := config.LoadMatrix(*matrixConfig)
		if err != nil {
			errs = append(errs, fmt.Sprintf("--matrix-config: %v", err))
		} else {
			mcfg = c.MatrixConfig()
		}
	}
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintf(stderr, "prober trace: %s\n", e)
		}
		fs.Usage()
		return cli.ExitUsage
	}

	host := hosts[0]
	dst, err := resolve(ctx, host, family)
	if err != nil {
		fmt.Fprintf(stderr, "prober trace: %v\n", err)
		return cli.ExitRuntime
	}
	if !src.IsValid() {
		if src, err = sourceFor(dst); err != nil {
			fmt.Fprintf(stderr, "prober trace: no route to %s: %v\n", dst, err)
			return cli.ExitRuntime
		}
	}
	tr, err := probe.NewStandaloneTracer(probe.StandaloneConfig{Source: src, PortBase: uint16(*sportBase), Flows: *flows})
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		// The probe's own message suggests a Pod's securityContext; an
		// operator at a shell wants setcap. Only the failed call is kept.
		cause := err
		if op := (*net.OpError)(nil); errors.As(err, &op) {
			cause = op
		}
		fmt.Fprintf(stderr, "prober trace: needs CAP_NET_RAW for its raw sockets: run it as root, or grant it to the binary with 'setcap cap_net_raw+ep %s' (%v)\n", os.Args[0], cause)
		return cli.ExitRuntime
	}
	if err != nil {
		fmt.Fprintf(stderr, "prober trace: %v\n", err)
		return cli.ExitRuntime
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tr.Run(rctx) }()
	defer func() { cancel(); <-done }()
	sports, err := tr.Ports(*flows)
	if err != nil {
		fmt.Fprintf(stderr, "prober trace: %v\n", err)
		return cli.ExitRuntime
	}

	start := time.Now()
	what := fmt.Sprintf("tracing %d flows to %s:%d", *flows, dst, *port)
	if *size > 0 {
		what += fmt.Sprintf(" with %d-byte probes", *size)
	}
	stopProgress := progress(stderr, what, start, time.Second)
	fts, err := tr.Trace(ctx, probe.Target{Addr: dst, Port: uint16(*port)}, sports, cfg)
	stopProgress()
	if err != nil {
		fmt.Fprintf(stderr, "prober trace: %v\n", err)
		return cli.ExitRuntime
	}
	rep, err := tracereport.New(tracereport.Trace{
		Host: host, Target: dst, Source: src, Port: uint16(*port),
		ProbesPerHop: cfg.Probes, ProbeSize: cfg.Size, Duration: time.Since(start), Flows: fts, At: time.Now(),
	}, mcfg)
	if err != nil {
		fmt.Fprintf(stderr, "prober trace: %v\n", err)
		return cli.ExitRuntime
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "prober trace: %v\n", err)
			return cli.ExitRuntime
		}
		return cli.ExitOK
	}
	tracereport.Print(stdout, rep)
	return cli.ExitOK
}

// resolve is host's address of family (-4, -6, or the source's), any
// family when "" (IPv4 first, as most tools prefer on a dual-stack name).
func resolve(ctx context.Context, host, family string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		if a.Zone() != "" {
			return netip.Addr{}, fmt.Errorf("host %s: a zoned address (link-local) is no traceroute target", host)
		}
		if family != "" && api.FamilyOf(a) != family {
			return netip.Addr{}, fmt.Errorf("host %s is not %s", host, family)
		}
		return a, nil
	}
	network := map[string]string{"": "ip", api.FamilyIPv4: "ip4", api.FamilyIPv6: "ip6"}[family]
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(rctx, network, host)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("cannot resolve host %q (%s): %v", host, cmp.Or(family, "any family"), err)
	}
	slices.SortStableFunc(addrs, func(x, y netip.Addr) int { return cmp.Compare(api.FamilyOf(x.Unmap()), api.FamilyOf(y.Unmap())) })
	return addrs[0].Unmap(), nil
}

// sourceFor asks the kernel which source address it would use towards
// dst: connecting a UDP socket sends nothing.
func sourceFor(dst netip.Addr) (netip.Addr, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

// progress prints what is going on to w every period, after the first,
// until stopped: on a terminal one line rewritten in place, else a line
// each time, so a log shows no carriage returns.
func progress(w io.Writer, what string, start time.Time, every time.Duration) (stop func()) {
	format, end := "%s... %ds\n", ""
	if isTerminal(w) {
		format, end = "\r%s... %ds", "\n"
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		printed := false
		for {
			select {
			case <-done:
				if printed {
					fmt.Fprint(w, end)
				}
				return
			case <-t.C:
				fmt.Fprintf(w, format, what, int(time.Since(start).Seconds()))
				printed = true
			}
		}
	}()
	return func() { close(done); <-finished }
}
