package config

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/plan"
)

// Matrix is the configuration of `prober matrix`.
type Matrix struct {
	// Listen serves /metrics, /api/v1/matrix, /api/v1/diagnosis and /.
	Listen string `json:"listen"`
	// Agents are the agents' base URLs (http://198.18.1.11:9808), with
	// static discovery.
	Agents []string `json:"agents,omitempty"`
	// Discovery is where the agents come from: static (default, Agents)
	// or kubernetes (the prober pods and nodes with a Ready agent, found
	// by the same informers the agents use).
	Discovery  string      `json:"discovery,omitempty"`
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
	// Plan bounds the probe plan the matrix computes and serves to the
	// agents with discovery: kubernetes.
	Plan MatrixPlan `json:"plan,omitempty"`
	// GroupBy is node, or an agent label key such as rack or zone.
	GroupBy string `json:"groupBy,omitempty"`
	// Interval is how often every agent is pulled and the matrix
	// recomputed.
	Interval Duration `json:"interval,omitempty"`
	// Window is how long an agent's latest observations count (they cover
	// the agent's own probing.window); older ones are no data, never loss.
	Window Duration `json:"window,omitempty"`
	// Timeout bounds one pull of one agent.
	Timeout Duration `json:"timeout,omitempty"`
	// Concurrency bounds the pulls in flight.
	Concurrency int `json:"concurrency,omitempty"`
	// Hops maps an address or CIDR to a device name.
	Hops map[string]string `json:"hops,omitempty"`
	// Worst is how many worst source-target pairs are listed.
	Worst int `json:"worst,omitempty"`
	// Cells exports every (source, target, path, protocol) cell, not only
	// the groupBy roll-up: fine at a hundred nodes, not at thousands.
	Cells bool `json:"cells,omitempty"`
	// Thresholds tune localization; see docs/localization.md.
	Thresholds MatrixThresholds `json:"thresholds,omitempty"`
	// Hosts are the names the matrix answers to besides IP addresses,
	// localhost and, with discovery: kubernetes, its Service's names
	// (an Ingress's host, say; "*.example.com" for every name under
	// one). A request naming another Host is refused, so a page that
	// rebinds its own name to the matrix (through an operator's
	// kubectl port-forward) cannot read it or trace.
	Hosts []string `json:"hosts,omitempty"`
	// TLS serves every endpoint (the agents' plans and pull keys, the
	// page, /metrics) over TLS with certFile and keyFile (a
	// kubernetes.io/tls Secret's tls.crt and tls.key), re-read when they
	// change, so a renewed Secret needs no restart; unset: plain HTTP.
	TLS *ServerTLS `json:"tls,omitempty"`
	Log string     `json:"log,omitempty"`
}

// MatrixThresholds mirror matrix.Thresholds; zero takes
// matrix.DefaultThresholds, and the ranges are matrix.Config.Check's.
type MatrixThresholds struct {
	Healthy   float64 `json:"healthy,omitempty"`
	Alpha     float64 `json:"alpha,omitempty"`
	VoteShare float64 `json:"voteShare,omitempty"`
	RackShare float64 `json:"rackShare,omitempty"`
	MinSent   uint64  `json:"minSent,omitempty"`
	MinScore  float64 `json:"minScore,omitempty"`
	LatencyMs float64 `json:"latencyMs,omitempty"`
}

// MatrixPlan bounds the probe plan (package plan).
type MatrixPlan struct {
	// MaxTargets is the most targets one agent probes, LB targets
	// included. Agents truncate a longer plan to their own
	// probing.maxTargets.
	MaxTargets int `json:"maxTargets,omitempty"`
	// InGroup is how many members of its own group probe each member.
	InGroup int `json:"inGroup,omitempty"`
	// Rotation is how long one round of the plan lasts when the pairs of
	// groups outnumber the budget and a rotation covers them.
	Rotation Duration `json:"rotation,omitempty"`
}

// LoadMatrix reads, defaults and validates a matrix configuration file.
func LoadMatrix(path string) (*Matrix, error) { return load[Matrix](path) }

// ParseMatrix is LoadMatrix on bytes; name prefixes the error messages.
func ParseMatrix(name string, b []byte) (*Matrix, error) { return parse[Matrix](name, b) }

// SetDefaults fills every unset field.
func (c *Matrix) SetDefaults() {
	if c.Discovery == "" {
		c.Discovery = DiscoveryStatic
	}
	if c.Discovery == DiscoveryKubernetes {
		if c.Kubernetes == nil {
			c.Kubernetes = &Kubernetes{}
		}
		c.Kubernetes.SetDefaults()
	}
	if c.GroupBy == "" {
		c.GroupBy = matrix.DefaultGroupBy
	}
	if c.Interval == 0 {
		c.Interval = Duration(5 * time.Second)
	}
	if c.Window == 0 {
		c.Window = Duration(matrix.DefaultWindow)
	}
	if c.Timeout == 0 {
		c.Timeout = Duration(min(2*time.Second, c.Interval.D()))
	}
	if c.Concurrency == 0 {
		c.Concurrency = 32
	}
	if c.Worst == 0 {
		c.Worst = matrix.DefaultK
	}
	th := c.MatrixConfig().Thresholds
	th.SetDefaults()
	c.Thresholds = MatrixThresholds(th)
	if c.Plan.MaxTargets == 0 {
		c.Plan.MaxTargets = plan.DefaultMaxTargets
	}
	if c.Plan.InGroup == 0 {
		c.Plan.InGroup = plan.DefaultInGroup
	}
	if c.Plan.Rotation == 0 {
		c.Plan.Rotation = Duration(10 * time.Minute)
	}
	if c.Log == "" {
		c.Log = "json"
	}
}

// MatrixConfig is the matrix.Config that hub.New builds the matrix with.
func (c *Matrix) MatrixConfig() matrix.Config {
	return matrix.Config{
		GroupBy: c.GroupBy, Hops: c.Hops, K: c.Worst, Window: c.Window.D(), Cells: c.Cells,
		Thresholds: matrix.Thresholds(c.Thresholds),
	}
}

// KubernetesDiscovery reports whether the matrix finds its agents in the
// cluster.
func (c *Matrix) KubernetesDiscovery() bool { return c.Discovery == DiscoveryKubernetes }

// Validate reports every problem, joined.
func (c *Matrix) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Listen == "" {
		bad("listen", "required, an address:port such as 198.18.1.11:9809")
	} else if _, err := netip.ParseAddrPort(c.Listen); err != nil {
		bad("listen", "%q is not an IP:port (%v)", c.Listen, err)
	}
	if validateDiscoveryKind(c.Discovery, c.Kubernetes, bad) {
		if len(c.Agents) > 0 {
			bad("agents", "must be empty with discovery: kubernetes (the matrix finds the agents)")
		}
		c.Kubernetes.validateMatrix(bad)
	} else if len(c.Agents) == 0 && c.Discovery == DiscoveryStatic {
		bad("agents", "required: the agents' base URLs, such as http://198.18.1.11:9808 (or discovery: kubernetes)")
	}
	seen := map[string]int{}
	for i, a := range c.Agents {
		f := fmt.Sprintf("agents[%d]", i)
		u, err := url.Parse(a)
		switch {
		case err != nil:
			bad(f, "%q is not a URL (%v)", a, err)
		case u.Scheme != "http" && u.Scheme != "https":
			bad(f, "%q: scheme must be http or https", a)
		case u.Host == "":
			bad(f, "%q has no host", a)
		case u.Path != "" && u.Path != "/":
			bad(f, "%q: give the agent's base URL, without a path", a)
		}
		if j, dup := seen[a]; dup {
			bad(f, "%q already listed as agents[%d]", a, j)
		}
		seen[a] = i
	}
	if c.Interval.D() < 100*time.Millisecond {
		bad("interval", "%s is below the 100ms minimum", c.Interval.D())
	}
	if c.Window.D() < c.Interval.D() {
		bad("window", "%s is shorter than interval %s", c.Window.D(), c.Interval.D())
	}
	if c.Timeout.D() <= 0 || c.Timeout.D() > c.Interval.D() {
		bad("timeout", "%s must be positive and at most interval %s", c.Timeout.D(), c.Interval.D())
	}
	if c.Concurrency < 1 || c.Concurrency > 1024 {
		bad("concurrency", "%d not in 1..1024", c.Concurrency)
	}
	if c.Plan.MaxTargets < 1 || c.Plan.MaxTargets > maxSourcePorts {
		bad("plan.maxTargets", "%d not in 1..%d", c.Plan.MaxTargets, maxSourcePorts)
	}
	if c.Plan.InGroup < 3 || c.Plan.InGroup > 64 {
		bad("plan.inGroup", "%d not in 3..64 (fewer than 3 probers cannot tell a node from its prober)", c.Plan.InGroup)
	}
	if c.Plan.Rotation.D() < time.Minute {
		bad("plan.rotation", "%s is below the 1m minimum", c.Plan.Rotation.D())
	}
	// The localization's ranges are the matrix package's: one check, the
	// one hub.New runs, with its field paths mapped to the file's.
	c.MatrixConfig().Check(func(field, format string, args ...any) {
		switch field {
		case "k":
			field = "worst"
		}
		bad(field, format, args...)
	})
	for i, h := range c.Hosts {
		if !validHostName(strings.TrimPrefix(h, "*.")) {
			bad(fmt.Sprintf("hosts[%d]", i), "%q is not a DNS name such as matrix.example.com or *.example.com (no scheme, port or path)", h)
		}
	}
	if t := c.TLS; t != nil {
		if t.SelfSigned || len(t.Hosts) > 0 {
			bad("tls", "certFile and keyFile only: agents cannot verify a self-signed matrix (the chart makes a CA and its certificate; docs/security.md)")
		} else {
			t.validate(bad)
		}
	}
	if c.Log != "json" && c.Log != "text" {
		bad("log", "%q not one of json, text", c.Log)
	}
	return errors.Join(errs...)
}

// validHostName: letters, digits and hyphens in dot-separated labels of
// 1-63 characters, 253 at most, as DNS names are.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
