package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/buildinfo"
	"github.com/netprober/prober/cmd/internal/cli"
	"github.com/netprober/prober/peers"
	"github.com/netprober/prober/tracereport"
)

// pluginName is the name kubectl runs prober by as its plugin: `make
// build` writes bin/kubectl-prober beside bin/prober.
const pluginName = "kubectl-prober"

const kubectlUsage = `usage: kubectl prober <command> [flags]

commands:
  status           what drops packets now: the suspects and their evidence
  who NODE         who probes NODE, whom it probes, and its cells
  trace SRC DST    trace a cell's pair now, through SRC's agent
  page             serve the matrix page on this machine and print its URL

Every command reaches the matrix pod through a port-forward, as kubectl
port-forward does, with your kubeconfig: a request or two each to the
matrix, small at any cluster size.
Run 'kubectl prober <command> -h' for its flags.
`

// kubectlContext is what every command of the plugin has.
type kubectlContext struct {
	name           string
	stdout, stderr io.Writer
	// fs has the kubeconfig flags; each command adds its own.
	fs   *flag.FlagSet
	kube *peers.KubeconfigOptions
	// timeout bounds each request.
	timeout *time.Duration
}

// dial forwards a port of address (0: any free one) to the matrix pod,
// as the kubeconfig flags say, within the request timeout.
func (kc kubectlContext) dial(ctx context.Context, address string, port int) (*peers.MatrixClient, error) {
	dctx, cancel := context.WithTimeout(ctx, *kc.timeout)
	defer cancel()
	return peers.DialMatrix(dctx, *kc.kube, buildinfo.UserAgent("kubectl-prober"), address, port)
}

// fail prints err as the command's and returns cli.ExitRuntime.
func (kc kubectlContext) fail(err error) int {
	fmt.Fprintf(kc.stderr, "%s: %v\n", kc.name, err)
	return cli.ExitRuntime
}

// runKubectl is `kubectl prober` (prober run as kubectl-prober) and
// `prober kubectl`.
func runKubectl(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, kubectlUsage)
		return cli.ExitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, kubectlUsage)
		return cli.ExitOK
	}
	var run func(ctx context.Context, kc kubectlContext, args []string) int
	switch args[0] {
	case "status":
		run = kubectlStatus
	case "who":
		run = kubectlWho
	case "trace":
		run = kubectlTrace
	case "page":
		run = kubectlPage
	default:
		fmt.Fprintf(stderr, "kubectl prober: unknown command %q\n\n%s", args[0], kubectlUsage)
		return cli.ExitUsage
	}
	kc := kubectlContext{name: "kubectl prober " + args[0], stdout: stdout, stderr: stderr, kube: &peers.KubeconfigOptions{}}
	kc.fs = flag.NewFlagSet(kc.name, flag.ContinueOnError)
	kc.fs.SetOutput(stderr)
	kc.fs.StringVar(&kc.kube.Path, "kubeconfig", "", "the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	kc.fs.StringVar(&kc.kube.Context, "context", "", "the kubeconfig context (default: its current one)")
	kc.fs.StringVar(&kc.kube.Namespace, "namespace", "prober", "the namespace prober runs in")
	kc.fs.StringVar(&kc.kube.Namespace, "n", "prober", "short for --namespace")
	kc.timeout = kc.fs.Duration("request-timeout", 30*time.Second, "how long one request may take")
	return run(ctx, kc, args[1:])
}

// parse parses a command's flags and checks it got want arguments
// (their names, for the usage line); code >= 0 means exit with it.
func (kc kubectlContext) parse(args []string, want ...string) (pos []string, code int) {
	kc.fs.Usage = func() {
		fmt.Fprintf(kc.stderr, "usage: %s %s[flags]\n\nflags:\n", kc.name, strings.Join(append(slices.Clone(want), ""), " "))
		kc.fs.PrintDefaults()
	}
	pos, code = cli.ParseInterspersed(kc.fs, args)
	if code >= 0 {
		return nil, code
	}
	if len(pos) != len(want) {
		fmt.Fprintf(kc.stderr, "%s: want %d arguments (%s), got %d\n", kc.name, len(want), strings.Join(want, " "), len(pos))
		kc.fs.Usage()
		return nil, cli.ExitUsage
	}
	if *kc.timeout <= 0 {
		fmt.Fprintf(kc.stderr, "%s: --request-timeout must be positive\n", kc.name)
		return nil, cli.ExitUsage
	}
	return pos, -1
}

// get fetches path?q from the matrix into into.
func (kc kubectlContext) get(ctx context.Context, c *peers.MatrixClient, path string, q url.Values, into any) error {
	ctx, cancel := context.WithTimeout(ctx, *kc.timeout)
	defer cancel()
	return c.Call(ctx, http.MethodGet, path, q, nil, into)
}

// printJSON prints v indented.
func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// kubectlStatus prints the diagnosis in words.
func kubectlStatus(ctx context.Context, kc kubectlContext, args []string) int {
	asJSON := kc.fs.Bool("json", false, "print the diagnosis as the matrix serves it")
	if _, code := kc.parse(args); code >= 0 {
		return code
	}
	c, err := kc.dial(ctx, "127.0.0.1", 0)
	if err != nil {
		return kc.fail(err)
	}
	defer c.Close()
	var d api.Diagnosis
	if err := kc.get(ctx, c, api.DiagnosisPath, nil, &d); err != nil {
		return kc.fail(err)
	}
	if *asJSON {
		printJSON(kc.stdout, d)
		return cli.ExitOK
	}
	printStatus(kc.stdout, d)
	return cli.ExitOK
}

// printStatus says what the diagnosis names, listed suspects first, in
// the words an operator reads.
func printStatus(w io.Writer, d api.Diagnosis) {
	if d.Time.IsZero() {
		fmt.Fprintln(w, "prober: the matrix has made no round yet")
		return
	}
	fmt.Fprintf(w, "prober: the matrix's round of %s\n", d.Time.UTC().Format(time.RFC3339))
	listed := d.Listed()
	if len(listed) == 0 {
		fmt.Fprintln(w, "nothing is dropping or delaying packets that prober can see")
	}
	for i, s := range listed {
		fam := ""
		if s.Family != "" {
			fam = " (" + s.Family + " only)"
		}
		fmt.Fprintf(w, "\n%d. %s %s%s: score %.2f, %s, since %s\n", i+1, s.Kind, s.Name, fam, s.Score, suspectEffect(s), s.Since.UTC().Format(time.RFC3339))
		if s.Evidence.Detail != "" {
			fmt.Fprintf(w, "   %s\n", s.Evidence.Detail)
		}
		e := s.Evidence
		fmt.Fprintf(w, "   evidence (%s): %.0f of %.0f probes lost, %d lossy and %d clean flows, p < %.1e\n", e.Stage, e.LostProbes, e.SentProbes, e.LossyFlows, e.CleanFlows, e.PValue)
		for _, t := range e.Ties {
			fmt.Fprintf(w, "   tied with %s %s: the data cannot tell them apart\n", t.Kind, t.Name)
		}
		for j, ex := range e.Examples {
			if j == 3 {
				fmt.Fprintf(w, "   ... %d more example flows (--json)\n", len(e.Examples)-j)
				break
			}
			fmt.Fprintf(w, "   e.g. %s -> %s %s: lost %d of %d%s\n", ex.Source, ex.Target, cmp.Or(ex.Path, "?"), ex.Lost, ex.Sent, flowTuple(ex))
		}
	}
	for _, dis := range d.Disputed {
		fmt.Fprintf(w, "\ndisputed, not a suspect: %s %s: %d agents blame it, %d see it clean (a lying or broken agent, or paths traced wrong)\n", dis.Kind, dis.Name, dis.Confirming, dis.Contradicting)
	}
	if unlisted := len(d.Suspects) - len(listed); unlisted > 0 {
		fmt.Fprintf(w, "\n(%d more below score %.1f: the scatter around those above; --json)\n", unlisted, api.ListScore)
	}
}

// suspectEffect is what a suspect does to the packets it forwards.
func suspectEffect(s api.Suspect) string {
	switch s.Kind {
	case api.KindLatency:
		return fmt.Sprintf("adds %.1f ms", s.AddedDelay*1000)
	case api.KindPMTU:
		return "drops large packets in silence (a path MTU black hole)"
	}
	return fmt.Sprintf("drops %.2f %% of what it forwards", 100*s.EstimatedLoss)
}

// flowTuple is an example flow's 5-tuple where the reports say it.
func flowTuple(ex api.FlowRef) string {
	if ex.SourceAddress == "" || ex.TargetAddress == "" {
		return ""
	}
	return fmt.Sprintf(" (tcp %s -> %s)", net.JoinHostPort(ex.SourceAddress, fmt.Sprint(ex.SourcePort)), net.JoinHostPort(ex.TargetAddress, fmt.Sprint(ex.TargetPort)))
}

// kubectlWho prints who probes a node, whom its agents probe, and the
// matrix's cells from and to it.
func kubectlWho(ctx context.Context, kc kubectlContext, args []string) int {
	asJSON := kc.fs.Bool("json", false, "print the node's plan and cells as JSON")
	pos, code := kc.parse(args, "NODE")
	if code >= 0 {
		return code
	}
	node := pos[0]
	c, err := kc.dial(ctx, "127.0.0.1", 0)
	if err != nil {
		return kc.fail(err)
	}
	defer c.Close()
	var plan api.PlanView
	if err := kc.get(ctx, c, api.PlanPath, url.Values{"node": {node}}, &plan); err != nil {
		return kc.fail(err)
	}
	if len(plan.Agents) == 0 {
		return kc.fail(fmt.Errorf("no agent runs on node %q in the matrix's plan (kubectl get nodes)", node))
	}
	var snap api.Snapshot
	if err := kc.get(ctx, c, api.MatrixPath, url.Values{"node": {node}}, &snap); err != nil {
		return kc.fail(err)
	}
	cells := slices.Concat(snap.Groups, snap.Worst)
	if *asJSON {
		printJSON(kc.stdout, struct {
			Plan  api.PlanView `json:"plan"`
			Cells []api.Cell   `json:"cells"`
		}{plan, cells})
		return cli.ExitOK
	}
	for _, a := range plan.Agents {
		fmt.Fprintf(kc.stdout, "agent %s (%s, group %s, %s)\n", a.Name, a.Class, a.Group, cmp.Or(a.Address, "no address"))
		fmt.Fprintf(kc.stdout, "  probes %d targets:", len(a.Targets))
		for i, t := range a.Targets {
			if i == 20 {
				fmt.Fprintf(kc.stdout, " ... %d more (--json)", len(a.Targets)-i)
				break
			}
			fmt.Fprintf(kc.stdout, " %s", t.Name)
		}
		by := plan.ProbedBy[a.Name]
		fmt.Fprintf(kc.stdout, "\n  probed by %d agents:", len(by))
		for i, b := range by {
			if i == 20 {
				fmt.Fprintf(kc.stdout, " ... %d more (--json)", len(by)-i)
				break
			}
			fmt.Fprintf(kc.stdout, " %s", b)
		}
		fmt.Fprintln(kc.stdout)
	}
	fmt.Fprintf(kc.stdout, "\ncells from or to %s (grouped by %s, and the worst pairs):\n", node, cmp.Or(snap.GroupBy, "node"))
	if len(cells) == 0 {
		fmt.Fprintln(kc.stdout, "  none in the matrix's last round")
	}
	slices.SortStableFunc(cells, func(a, b api.Cell) int { return cmp.Compare(b.LossRatio, a.LossRatio) })
	for _, c := range cells {
		fmt.Fprintf(kc.stdout, "  %s -> %s %s %s %s: lost %d of %d (%.3f %%), rtt p50 %.2f ms\n", c.Source, c.Target, c.Path, c.Protocol, c.Family, c.Lost, c.Sent, 100*c.LossRatio, 1000*c.RTTP50)
	}
	return cli.ExitOK
}

// maxTraceTries bounds how often trace asks while the matrix answers
// that the agent's trace budget is spent; the request's 2-minute bound
// is the real limit. On the cluster the agent's own traces kept
// spending the budget it refilled: 4 tries (36 s) were not enough.
const maxTraceTries = 10

// traceRetry is how long to wait before asking for a trace again after
// err, the try-th answer, with left of the request's bound: the agent's
// trace budget refills within a minute and the matrix says when
// (Retry-After on a 429). Any other error, or no time left, is final.
func traceRetry(err error, try int, left time.Duration) (time.Duration, bool) {
	var ae *peers.AnswerError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.RetryAfter <= 0 || ae.RetryAfter > time.Minute ||
		try >= maxTraceTries || left < ae.RetryAfter+5*time.Second {
		return 0, false
	}
	return ae.RetryAfter, true
}

// kubectlTrace traces a pair now through the matrix and prints it as
// `prober trace` does.
func kubectlTrace(ctx context.Context, kc kubectlContext, args []string) int {
	path := kc.fs.String("path", api.PathNodeToNode, "the cell's path class: "+strings.Join(api.PathClasses, ", "))
	family := kc.fs.String("family", "", "the address family, ipv4 or ipv6 (default: the pair's only one, else ipv4)")
	large := kc.fs.Bool("large", false, "trace with the pair's large probes: where a path MTU black hole ends them")
	asJSON := kc.fs.Bool("json", false, "print the matrix's answer as JSON")
	pos, code := kc.parse(args, "SRC", "DST")
	if code >= 0 {
		return code
	}
	if !slices.Contains(api.PathClasses, *path) {
		fmt.Fprintf(kc.stderr, "%s: --path %q: want one of %s\n", kc.name, *path, strings.Join(api.PathClasses, ", "))
		return cli.ExitUsage
	}
	if *family != "" && *family != api.FamilyIPv4 && *family != api.FamilyIPv6 {
		fmt.Fprintf(kc.stderr, "%s: --family %q: want ipv4 or ipv6\n", kc.name, *family)
		return cli.ExitUsage
	}
	c, err := kc.dial(ctx, "127.0.0.1", 0)
	if err != nil {
		return kc.fail(err)
	}
	defer c.Close()
	q := url.Values{"source": {pos[0]}, "target": {pos[1]}, "path": {*path}, "family": {*family}}
	if *large {
		q.Set(api.TraceLarge, "1")
	}
	// A trace takes its agent tens of seconds; the request's bound is the
	// larger of the flag and the matrix's own for a trace.
	rctx, cancel := context.WithTimeout(ctx, max(*kc.timeout, 2*time.Minute))
	defer cancel()
	fmt.Fprintf(kc.stderr, "tracing %s -> %s (%s) through the matrix...\n", pos[0], pos[1], *path)
	var v api.TraceView
	for try := 1; ; try++ {
		err := c.Call(rctx, http.MethodPost, api.TracePath, q, http.Header{api.TraceHeader: {"1"}}, &v)
		if err == nil {
			break
		}
		deadline, _ := rctx.Deadline()
		wait, ok := traceRetry(err, try, time.Until(deadline))
		if !ok {
			return kc.fail(err)
		}
		fmt.Fprintf(kc.stderr, "%v\ntrying again in %v (%d of %d)...\n", err, wait, try+1, maxTraceTries)
		select {
		case <-rctx.Done():
			return kc.fail(rctx.Err())
		case <-time.After(wait):
		}
	}
	if *asJSON {
		printJSON(kc.stdout, v)
		return cli.ExitOK
	}
	fmt.Fprintf(kc.stdout, "agent %s to %s (%s, %s), in the matrix's window: lost %d of %d\n", v.Agent, v.Target, v.Path, v.Family, v.Lost, v.Sent)
	tracereport.Print(kc.stdout, v.Report)
	return cli.ExitOK
}

// kubectlPage serves the matrix page on a loopback port, proxied
// through a port-forward to the matrix pod, prints its URL and keeps
// both until interrupted.
func kubectlPage(ctx context.Context, kc kubectlContext, args []string) int {
	port := kc.fs.Int("port", 0, "the local port (0: any free one)")
	address := kc.fs.String("address", "127.0.0.1", "the loopback address to listen on")
	if _, code := kc.parse(args); code >= 0 {
		return code
	}
	if ip := net.ParseIP(*address); ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(kc.stderr, "%s: --address %q: want a loopback address (the matrix's page and trace are for you alone)\n", kc.name, *address)
		return cli.ExitUsage
	}
	if *port < 0 || *port > 65535 {
		fmt.Fprintf(kc.stderr, "%s: --port %d not in 0..65535\n", kc.name, *port)
		return cli.ExitUsage
	}
	// The page is served here, in plain HTTP on loopback, and proxied
	// through the forward (on a port of its own): a matrix serving TLS
	// has a certificate no browser knows, for names that are not
	// 127.0.0.1, and one without TLS is reached the same way.
	c, err := kc.dial(ctx, *address, 0)
	if err != nil {
		return kc.fail(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*address, strconv.Itoa(*port)))
	if err != nil {
		c.Close()
		return kc.fail(err)
	}
	srv := &http.Server{Handler: c.Proxy(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Fprintf(kc.stdout, "the matrix page (%s/%s): http://%s/ (Ctrl-C to stop)\n", c.Namespace, c.Pod, ln.Addr())
	if err := c.Wait(ctx); err != nil {
		return kc.fail(err)
	}
	return cli.ExitOK
}
