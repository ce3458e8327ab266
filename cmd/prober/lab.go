package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/netprober/prober/cmd/internal/cli"
	"github.com/netprober/prober/lab"
)

var labSubcommands = []struct{ name, summary string }{
	{"up", "build a fabric and print its inventory and hops"},
	{"down", "remove every namespace of a lab (also after a crash)"},
	{"fault", "inject a fault: " + strings.Join(lab.FaultKinds, ", ")},
	{"clear", "remove every injected fault"},
	{"demo", "build a fabric, run agents and the matrix, break a spine"},
	{"cluster", "build a real Kubernetes cluster on a fabric, apply deploy/, break a spine"},
}

// runLab is `prober lab up|down|fault|clear|demo`.
func runLab(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		labUsage(stderr)
		return cli.ExitUsage
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	switch args[0] {
	case "-h", "--help", "help":
		labUsage(stdout)
		return cli.ExitOK
	case "up":
		return runLabUp(ctx, args[1:], stdout, stderr, logger)
	case "down":
		return runLabDown(args[1:], stdout, stderr)
	case "fault":
		return runLabFault(ctx, args[1:], stdout, stderr, logger)
	case "clear":
		return runLabClear(ctx, args[1:], stdout, stderr, logger)
	case "demo":
		return runLabDemo(ctx, args[1:], stdout, stderr)
	case "cluster":
		return runLabCluster(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "prober lab: unknown subcommand %q\n\n", args[0])
	labUsage(stderr)
	return cli.ExitUsage
}

func labUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: prober lab <subcommand> [flags]\n\nBuilds a data-center fabric from network namespaces (needs root). See docs/lab.md.\n\nsubcommands:")
	for _, s := range labSubcommands {
		fmt.Fprintf(w, "  %-7s %s\n", s.name, s.summary)
	}
}

// labPrivileged prints one line and returns false when the lab cannot run.
func labPrivileged(name string, stderr io.Writer) bool {
	if err := lab.NeedNetAdmin(); err != nil {
		fmt.Fprintf(stderr, "prober lab %s: %v\n", name, err)
		return false
	}
	return true
}

func prefixFlag(fs *flag.FlagSet) *string {
	return fs.String("prefix", lab.DefaultPrefix, "namespace name prefix of the lab")
}

// noArgs reports stray positional arguments as a usage error.
func noArgs(fs *flag.FlagSet, name string, stderr io.Writer) bool {
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prober lab %s: unexpected argument %q\n", name, fs.Arg(0))
		return false
	}
	return true
}

func runLabUp(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) int {
	fs := cli.NewFlagSet("prober lab up", "[--spines N] [--racks N] [--nodes N] [--pods N] [--zones N] [--lb=false] [--lb-ports P,P] [--ipv6] [--overlay] [--drop-echo] [--silent-routers] [--super-spines N [--racks-per-pod N]] [--prefix P]", stderr)
	prefix := prefixFlag(fs)
	spines := fs.Int("spines", lab.DefaultSpines, "spine routers (1..8); with --super-spines, aggregation switches per fabric pod")
	racks := fs.Int("racks", lab.DefaultRacks, "racks, one ToR each (1..9)")
	nodes := fs.Int("nodes", lab.DefaultNodesPerRack, "nodes per rack (1..9)")
	pods := fs.Int("pods", lab.DefaultPodsPerNode, "pods per node (0..9)")
	zones := fs.Int("zones", 0, "zones the racks are grouped into (default: one per rack, at most 3)")
	withLB := fs.Bool("lb", true, "add a load balancer with a VIP in front of every node")
	lbPorts := fs.String("lb-ports", "", "TCP ports the VIP balances, comma-separated (default: every port)")
	ipv6 := fs.Bool("ipv6", false, "dual stack: also number every device from 2001:2::/48, with an IPv6 VIP")
	overlay := fs.Bool("overlay", false, "pods on a VXLAN overlay (flannel's vxlan backend: flannel.1, UDP 8472, MTU 1450); the routers know no pod address")
	dropEcho := fs.Bool("drop-echo", false, "nodes drop ICMP echo requests, as a host firewall or security group does")
	silent := fs.Bool("silent-routers", false, "ToRs and spines send no ICMP time exceeded, as cloud VPC routers")
	supers := fs.Int("super-spines", 0, "three tiers: super-spines (1..8) over fabric pods of aggregation switches (default: two tiers)")
	perPod := fs.Int("racks-per-pod", 0, "three tiers: racks per fabric pod (default 2)")
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code
	}
	if !noArgs(fs, "up", stderr) {
		return cli.ExitUsage
	}
	ports, err := lab.ParsePorts(*lbPorts)
	if err != nil {
		fmt.Fprintf(stderr, "prober lab up: --lb-ports: %v\n", err)
		return cli.ExitUsage
	}
	spec := lab.Spec{Prefix: *prefix, Spines: *spines, Racks: *racks, NodesPerRack: *nodes,
		PodsPerNode: *pods, Zones: *zones, LB: *withLB, LBPorts: ports, IPv6: *ipv6,
		Overlay: *overlay, DropEcho: *dropEcho, SilentRouters: *silent, SuperSpines: *supers, RacksPerPod: *perPod}
	if *pods == 0 {
		spec.PodsPerNode = -1 // Spec's zero means "default"; the flag's 0 means none
	}
	spec.SetDefaults()
	if err := spec.Validate(); err != nil {
		fmt.Fprintf(stderr, "prober lab up: %v\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		return cli.ExitUsage
	}
	if !labPrivileged("up", stderr) {
		return cli.ExitRuntime
	}
	f, err := lab.Up(ctx, spec, logger)
	if err != nil {
		fmt.Fprintf(stderr, "prober lab up: %v\n", err)
		return cli.ExitRuntime
	}
	printInventory(stdout, f)
	return cli.ExitOK
}

func runLabDown(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("prober lab down", "[--prefix P]", stderr)
	prefix := prefixFlag(fs)
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code
	}
	if !noArgs(fs, "down", stderr) {
		return cli.ExitUsage
	}
	if !labPrivileged("down", stderr) {
		return cli.ExitRuntime
	}
	if err := lab.Down(*prefix); err != nil {
		fmt.Fprintf(stderr, "prober lab down: %v\n", err)
		return cli.ExitRuntime
	}
	fmt.Fprintf(stdout, "lab %s: down\n", *prefix)
	return cli.ExitOK
}

func runLabFault(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) int {
	fs := cli.NewFlagSet("prober lab fault", "[--prefix P] KIND [flags] [--family ipv4|ipv6]\n\nkinds:\n"+
		"  device-loss --device spine2 --permille 50\n"+
		"  link-loss   --from tor1 --to spine2 --permille 20 [--both]\n"+
		"  blackhole   --device spine1 --mod 4\n"+
		"  lb-forget\n"+
		"  lb-loss     --permille 200\n"+
		"  pod-node-loss --permille 100\n"+
		"  host-nic    --host n21 --permille 300\n"+
		"  partition   --zone z1 | --rack r1\n"+
		"  port-loss   --host n21 --proto udp --port 53 [--addr 198.18.x.y] --permille 200\n"+
		"  mtu-blackhole --from tor1 --to spine2 --mtu 1200 [--both]\n"+
		"  mtu         --from tor1 --to spine2 --mtu 1200\n"+
		"  delay       --device spine2 --millis 20   (runs in the foreground: this process holds the packets)", stderr)
	prefix := prefixFlag(fs)
	var ft lab.Fault
	fs.StringVar(&ft.Device, "device", "", "router to break: spineN, torN or lb (device-loss, blackhole, delay)")
	fs.StringVar(&ft.From, "from", "", "sending end of the link (link-loss, mtu-blackhole, mtu)")
	fs.StringVar(&ft.To, "to", "", "receiving end of the link (link-loss, mtu-blackhole, mtu)")
	fs.BoolVar(&ft.Both, "both", false, "break both directions of the link (link-loss, mtu-blackhole)")
	fs.StringVar(&ft.Host, "host", "", "node or pod whose NIC drops, such as n21 (host-nic); where port-loss drops")
	fs.StringVar(&ft.Rack, "rack", "", "rack to cut off, such as r1 (partition)")
	fs.StringVar(&ft.Zone, "zone", "", "zone to cut off, such as z1 (partition)")
	fs.IntVar(&ft.Permille, "permille", 0, "packets dropped per thousand, 1..1000 (loss kinds)")
	fs.IntVar(&ft.Mod, "mod", 0, "black-hole the flows whose 5-tuple hash is 0 mod this (blackhole)")
	fs.StringVar(&ft.Family, "family", "", "break only this IP family, ipv4 or ipv6 (any kind; default both)")
	fs.StringVar(&ft.Proto, "proto", "", "udp or tcp (port-loss)")
	fs.IntVar(&ft.Port, "port", 0, "destination port to drop (port-loss)")
	fs.StringVar(&ft.Addr, "addr", "", "only packets to this address, such as a pod's behind --host (port-loss)")
	fs.IntVar(&ft.Millis, "millis", 0, "milliseconds the device holds each packet it forwards, 1..1000 (delay)")
	fs.IntVar(&ft.MTU, "mtu", 0, "the largest packet the link passes, in bytes: longer ones vanish, no sender told (mtu-blackhole), or get the routers' fragmentation needed (mtu)")
	// The kind may come first (`fault device-loss --device spine2`) or
	// after the lab's flags (`fault --prefix x device-loss ...`).
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		ft.Kind, args = args[0], args[1:]
	}
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code
	}
	if ft.Kind == "" && fs.NArg() > 0 {
		ft.Kind = fs.Arg(0)
		if code := cli.ParseFlags(fs, fs.Args()[1:]); code >= 0 {
			return code
		}
	}
	if !noArgs(fs, "fault", stderr) {
		return cli.ExitUsage
	}
	if ft.Kind == "" {
		fmt.Fprintf(stderr, "prober lab fault: missing KIND (one of %s)\n", strings.Join(lab.FaultKinds, ", "))
		return cli.ExitUsage
	}
	if !labPrivileged("fault", stderr) {
		return cli.ExitRuntime
	}
	f, err := lab.Load(*prefix)
	if err != nil {
		fmt.Fprintf(stderr, "prober lab fault: %v\n", err)
		return cli.ExitRuntime
	}
	if err := f.Check(ft); err != nil {
		fmt.Fprintf(stderr, "prober lab fault: %v\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		return cli.ExitUsage
	}
	if err := f.Inject(ctx, ft); err != nil {
		fmt.Fprintf(stderr, "prober lab fault: %v\n", err)
		return cli.ExitRuntime
	}
	logger.Debug("fault", "fault", ft.String())
	if ft.Holds() {
		fmt.Fprintf(stdout, "lab %s: injected %s: holding packets until interrupted or 'prober lab clear --prefix %s'\n", *prefix, ft, *prefix)
		if err := f.Hold(ctx); err != nil {
			fmt.Fprintf(stderr, "prober lab fault: %v\n", err)
			return cli.ExitRuntime
		}
		fmt.Fprintf(stdout, "lab %s: %s ended\n", *prefix, ft)
		return cli.ExitOK
	}
	fmt.Fprintf(stdout, "lab %s: injected %s (undo: prober lab clear --prefix %s)\n", *prefix, ft, *prefix)
	return cli.ExitOK
}

func runLabClear(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) int {
	fs := cli.NewFlagSet("prober lab clear", "[--prefix P]", stderr)
	prefix := prefixFlag(fs)
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code
	}
	if !noArgs(fs, "clear", stderr) {
		return cli.ExitUsage
	}
	if !labPrivileged("clear", stderr) {
		return cli.ExitRuntime
	}
	f, err := lab.Load(*prefix)
	if err != nil {
		fmt.Fprintf(stderr, "prober lab clear: %v\n", err)
		return cli.ExitRuntime
	}
	if err := f.Clear(ctx); err != nil {
		fmt.Fprintf(stderr, "prober lab clear: %v\n", err)
		return cli.ExitRuntime
	}
	fmt.Fprintf(stdout, "lab %s: faults cleared\n", *prefix)
	return cli.ExitOK
}

// printInventory writes the hosts and routers as aligned tables, then the
// matrix's hops: configuration.
func printInventory(w io.Writer, f *lab.Fabric) {
	s := f.Spec
	fmt.Fprintf(w, "lab %s: %s, %d pods per node, %d zones", s.Prefix, s.Shape(), max(s.PodsPerNode, 0), s.Zones)
	if f.VIP.IsValid() {
		fmt.Fprintf(w, ", LB VIP %s (SNAT %s)", f.VIP, f.LBSource)
	}
	if f.VIP6.IsValid() {
		fmt.Fprintf(w, ", IPv6 VIP %s (SNAT %s)", f.VIP6, f.LBSource6)
	}
	fmt.Fprintf(w, "\nenter a namespace: ip netns exec %s-n11 sh    remove: prober lab down --prefix %s\n\n", s.Prefix, s.Prefix)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// row leaves the ADDRESS6 column out of a fabric without IPv6.
	row := func(name, class, addr, addr6, rack, zone, node, ns string) {
		cols := []string{name, class, addr, addr6, rack, zone, node, ns}
		if !s.IPv6 {
			cols = slices.Delete(cols, 3, 4)
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	row("HOST", "CLASS", "ADDRESS", "ADDRESS6", "RACK", "ZONE", "NODE", "NAMESPACE")
	for _, h := range f.Hosts {
		row(h.Name, h.Class, h.Addr.String(), h.Addr6.String(), h.Rack, h.Zone, h.Node, h.Namespace)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTER\tKIND\tNAMESPACE\tINTERFACES")
	for _, r := range f.Routers {
		var ifs []string
		for _, i := range r.Interfaces {
			if i.Addr6.IsValid() {
				ifs = append(ifs, i.Name+"="+i.Addr.String()+","+i.Addr6.String())
			} else {
				ifs = append(ifs, i.Name+"="+i.Addr.String())
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Kind, r.Namespace, strings.Join(ifs, " "))
	}
	tw.Flush()

	fmt.Fprintln(w, "\n# for the matrix configuration:\nhops:")
	hops := f.Hops()
	addrs := make([]netip.Addr, 0, len(hops))
	for a := range hops {
		if addr, err := netip.ParseAddr(a); err == nil {
			addrs = append(addrs, addr)
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	for _, a := range addrs {
		fmt.Fprintf(w, "  %q: %s\n", a.String(), hops[a.String()])
	}
}
