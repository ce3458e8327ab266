package testbed

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/lab"
)

// AgentPort is the port lab agents listen on and are probed at.
const AgentPort = config.DefaultPort

// AgentConfig is the configuration of an agent on lab host self that
// probes targets on schedule p (zero fields take the agent's defaults):
// self's name, class and labels (zone, node), listening on self's
// address at AgentPort, logging JSON; each target with its own class and
// labels, at AgentPort. On a dual-stack fabric (Spec.IPv6) the agent
// sends from both of self's addresses and probes each target over both
// families. Change the result for anything else: another target
// (VIPTarget), TLS, another port.
func AgentConfig(self lab.Host, p config.Probing, targets ...lab.Host) *config.Agent {
	return agentConfig(self, api.Families, p, targets...)
}

// agentConfig is AgentConfig over the address families fams only: the
// agent sends from self's address of each of fams it has, and probes
// each target at its address of each of those families.
func agentConfig(self lab.Host, fams []string, p config.Probing, targets ...lab.Host) *config.Agent {
	c := &config.Agent{
		Name:    self.Name,
		Class:   self.Class,
		Listen:  netip.AddrPortFrom(self.Addr, AgentPort).String(),
		Labels:  hostLabels(self),
		Log:     "json",
		Probing: p,
	}
	srcs := hostAddrs(self, fams)
	if len(srcs) != 1 || srcs[0] != self.Addr {
		// Dual-stack, or IPv6 alone: peers reach it over IPv6, so it
		// listens at the unspecified address, where Go listens on both
		// families, as the chart's agents do. Its first source is where
		// the harness (and the matrix) reach it.
		var list []string
		for _, a := range srcs {
			list = append(list, a.String())
		}
		c.Source = strings.Join(list, ",")
		c.Listen = netip.AddrPortFrom(netip.IPv4Unspecified(), AgentPort).String()
	}
	srcFams := make([]string, 0, len(srcs))
	for _, a := range srcs {
		srcFams = append(srcFams, api.FamilyOf(a))
	}
	for _, t := range targets {
		for _, a := range hostAddrs(t, srcFams) {
			c.Targets = append(c.Targets, config.Target{Name: t.Name, Address: a.String(), Class: t.Class, Port: AgentPort, Labels: hostLabels(t)})
		}
	}
	return c
}

// hostAddrs are h's addresses of the families fams, in their order.
func hostAddrs(h lab.Host, fams []string) []netip.Addr {
	var out []netip.Addr
	for _, f := range fams {
		a := h.Addr
		if f == api.FamilyIPv6 {
			a = h.Addr6
		}
		if a.IsValid() {
			out = append(out, a)
		}
	}
	return out
}

// hostLabels are a lab host's labels. No rack: as on a cluster whose
// Nodes carry none, the matrix learns a node's rack from its first hop,
// the rack's ToR (issue 14), and the scenarios show that this localizes.
func hostLabels(h lab.Host) map[string]string {
	return map[string]string{"zone": h.Zone, "node": h.Node}
}

// VIPTarget is the lab LB's VIP as an agent's target. The agents behind
// it serve h2c, so http2_ping speaks h2c (an lb target defaults to TLS).
func VIPTarget(vip netip.Addr) config.Target {
	return config.Target{Name: "vip", Address: vip.String(), Class: config.ClassLB, Port: AgentPort, HTTP2: config.HTTP2H2C}
}

// Prober is the prober executable the testbed runs agents from.
type Prober struct {
	// Path is a build of ./cmd/prober, or a test binary that acts as
	// prober when Env says so.
	Path string
	// Agent, when set, is a build of ./cmd/prober-agent, which agents
	// then run instead of Path's `agent` subcommand, as the DaemonSets do.
	Agent string
	// Env is added to its environment (cmd/prober's tests:
	// PROBER_TEST_AS_MAIN=1).
	Env []string
}

// AgentSpec says how to start one agent.
type AgentSpec struct {
	Prober Prober
	// Host is the lab host whose namespace the agent runs in;
	// Config.Name when empty.
	Host string
	// Config is written to Dir/<Config.Name>.yaml (as JSON, which YAML
	// readers take); its listen address and TLS say where the agent
	// serves.
	Config *config.Agent
	// Dir holds the agent's config and log; it must exist.
	Dir string
}

// Agent is a `prober agent` process started by StartAgent, and a client
// of its endpoints from inside its namespace.
type Agent struct {
	*Process
	name   string
	url    string
	client *http.Client
}

// Name is the agent's name, its configuration's.
func (a *Agent) Name() string { return a.name }

// URL is the base URL of the agent's endpoints.
func (a *Agent) URL() string { return a.url }

// Close stops the agent as Process.Close does.
func (a *Agent) Close() error {
	err := a.Process.Close()
	a.client.CloseIdleConnections()
	return err
}

// agentClient returns a client that reaches an agent configured by c
// from inside namespace ns, and the agent's base URL.
func agentClient(ns string, c *config.Agent) (*http.Client, string) {
	// 5 s: at a load average of 25 (CI beside other jobs) an agent took
	// over 2 s to answer the harness, which failed a scenario that was
	// localizing right.
	client := lab.HTTPClient(ns, 5*time.Second)
	listen := c.Listen
	if ap, err := netip.ParseAddrPort(listen); err == nil && ap.Addr().IsUnspecified() {
		listen = netip.AddrPortFrom(c.SourceAddr(), ap.Port()).String()
	}
	if c.TLS == nil {
		return client, "http://" + listen
	}
	// The harness asks whether the agent serves, not who it is: the
	// probes under test are the ones that verify certificates.
	client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	return client, "https://" + listen
}

// WriteConfig writes v as indented JSON, which YAML readers take, to
// dir/name.yaml and returns the file's path: an agent's, a matrix's or
// Prometheus's configuration.
func WriteConfig(dir, name string, v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", fmt.Errorf("%s config: %w", name, err)
	}
	path := filepath.Join(dir, name+".yaml")
	return path, os.WriteFile(path, b, 0o644)
}

// WaitHealthy waits until the agent answers /healthz with 200 OK. It
// fails, with the agent's last log lines, when within passes or the
// agent exits first.
func (a *Agent) WaitHealthy(ctx context.Context, within time.Duration) error {
	return a.waitOK(ctx, a.client, a.url+"/healthz", within, "healthy")
}

// Observations returns the agent's /api/v1/observations.
func (a *Agent) Observations(ctx context.Context) (api.Observations, error) {
	var obs api.Observations
	b, err := a.fetch(ctx, api.ObservationsPath)
	if err != nil {
		return obs, err
	}
	if err := json.Unmarshal(b, &obs); err != nil {
		return obs, fmt.Errorf("agent %s observations: %w", a.name, err)
	}
	return obs, nil
}

// Metrics returns the agent's /metrics exposition.
func (a *Agent) Metrics(ctx context.Context) (string, error) {
	b, err := a.fetch(ctx, "/metrics")
	return string(b), err
}

// fetch returns the body of a 200 response to GET path.
func (a *Agent) fetch(ctx context.Context, path string) ([]byte, error) {
	b, err := Get(ctx, a.client, a.url+path)
	if err != nil {
		return nil, a.failure(err)
	}
	return b, nil
}

// maxBody bounds what Get reads of a response.
const maxBody = 16 << 20

// Get returns the body of a 200 OK response to a GET of u with c, read
// up to 16 MiB; any other status is an error.
func Get(ctx context.Context, c *http.Client, u string) ([]byte, error) {
	b, status, err := get(ctx, c, u)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET %s: %d %s", u, status, http.StatusText(status))
	}
	return b, err
}

func get(ctx context.Context, c *http.Client, u string) (body []byte, status int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return body, resp.StatusCode, err
}
