package agent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/buildinfo"
	"github.com/netprober/prober/probe"
)

// PlanSource is where an agent follows its probe plan: the matrix, which
// alone watches the cluster.
type PlanSource struct {
	// URL is the matrix's base URL.
	URL string
	// APIServerCAFile verifies the API server's VIPs (targets the plan
	// marks apiServer) when http2_ping reaches them over TLS.
	APIServerCAFile string
	// Labels are the agent's configured labels; they win over those the
	// plan gives (node, zone, rack).
	Labels map[string]string
	// Wait is how long each long-poll asks the matrix to hold; 0 means 30s.
	Wait time.Duration
	// TLS verifies the matrix when URL is https (tlsfiles.Roots.Config,
	// for kubernetes.matrixCAFile); nil: the system's CAs.
	TLS *tls.Config
	// Transport carries the requests; nil: a direct (never proxied) one
	// with TLS.
	Transport http.RoundTripper
	// TokenFile is the agent's projected ServiceAccount token, read for
	// every request (the kubelet replaces it before it expires); empty:
	// none is sent.
	TokenFile string
}

// maxPlanBody bounds one plan: 4,096 targets of a few hundred bytes.
const maxPlanBody = 8 << 20

// Follow keeps a long-poll open to the matrix and applies every new plan
// of this agent (targets and its own labels) until ctx ends. While the
// matrix is away or knows no plan for this agent, the agent keeps probing
// its last plan and retries with backoff (1s doubling to 30s); it returns
// only ctx's end.
func (a *Agent) Follow(ctx context.Context, src PlanSource) error {
	wait := src.Wait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	tr := src.Transport
	if tr == nil {
		tr = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, IdleConnTimeout: 2 * wait, TLSClientConfig: src.TLS}
	}
	client := &http.Client{Transport: tr, Timeout: wait + 15*time.Second,
		// The matrix answers; a redirect is not it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	u := src.URL + api.AgentPlanPath + url.PathEscape(a.cfg.Name)
	version, backoff, failing := "", time.Second, false
	for ctx.Err() == nil {
		plan, err := a.fetchPlan(ctx, client, u, version, wait, src.TokenFile)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			if !failing {
				a.log.Warn("plan: matrix unreachable or no plan yet; probing the last plan", "matrix", src.URL, "err", err)
			}
			// Ask afresh next time: a matrix that restarted answers at
			// once, with the pull key it now presents.
			failing, version = true, ""
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
		case plan == nil: // not modified
			backoff = time.Second
		default:
			if failing {
				a.log.Info("plan: matrix answers again", "matrix", src.URL)
			}
			failing, backoff = false, time.Second
			version = plan.Version
			a.applyPlan(ctx, plan, src)
		}
	}
	return nil
}

// fetchPlan long-polls for a plan other than version; nil, nil when the
// matrix says not modified.
func (a *Agent) fetchPlan(ctx context.Context, c *http.Client, u, version string, wait time.Duration, tokenFile string) (*api.AgentPlan, error) {
	q := url.Values{"wait": {strconv.Itoa(int(wait / time.Second))}}
	if version != "" {
		q.Set("version", version)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", buildinfo.UserAgent("agent"))
	if tokenFile != "" {
		tok, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("kubernetes.tokenFile: %w (deploy/ projects the token there; without it the matrix refuses the plan)", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNotModified {
		a.pull.set(resp.Header.Get(api.PullKeyHeader))
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotModified:
		return nil, nil
	default:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("%s: %s", resp.Status, msg)
	}
	var p api.AgentPlan
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxPlanBody)).Decode(&p); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if p.Version == "" {
		return nil, errors.New("plan without a version")
	}
	return &p, nil
}

// applyPlan makes p's targets the probed ones and reports p's labels for
// the agent, under the configured ones.
func (a *Agent) applyPlan(ctx context.Context, p *api.AgentPlan, src PlanSource) {
	labels := maps.Clone(p.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, src.Labels)
	a.SetLabels(labels)
	ts, bad := TargetsFromPlan(p.Targets, src.APIServerCAFile)
	for _, err := range bad {
		a.log.Warn("plan: target skipped", "err", err)
	}
	if len(ts) > a.cfg.MaxTargets {
		a.log.Warn("plan: more targets than probing.maxTargets; probing the first", "targets", len(ts), "maxTargets", a.cfg.MaxTargets)
		ts = ts[:a.cfg.MaxTargets]
	}
	a.log.Info("plan", "version", p.Version, "group", p.Group, "targets", len(ts))
	if err := a.SetTargets(ctx, ts); err != nil {
		a.log.Warn("targets", "err", err)
	}
}

// TargetsFromPlan converts a plan's targets, skipping (and naming) those
// an agent cannot probe. The API server's VIPs are verified with
// apiServerCA.
func TargetsFromPlan(ps []api.Peer, apiServerCA string) ([]Target, []error) {
	return targetsFromPeers(ps, func(_ int, h *api.PeerHTTP2) string {
		if h.APIServer {
			return apiServerCA
		}
		return ""
	})
}

// targetsFromPeers makes every Target, the plan's and the static ones
// (ConfigFrom), and is the agent's one check of them: a peer an agent
// cannot probe is skipped and named. caFile is the CA file of ps[i]'s
// HTTP/2 pinger, asked only when the peer has an http2 block: the
// plan's form carries no file of the agent's.
func targetsFromPeers(ps []api.Peer, caFile func(i int, h *api.PeerHTTP2) string) ([]Target, []error) {
	out := make([]Target, 0, len(ps))
	var bad []error
	for i, p := range ps {
		addrs, err := peerAddrs(p)
		switch {
		case err != nil:
			bad = append(bad, fmt.Errorf("%s: %w", p.Name, err))
			continue
		case p.Name == "":
			bad = append(bad, fmt.Errorf("target at %s has no name", p.Address))
			continue
		case p.Class != api.ClassNode && p.Class != api.ClassPod && p.Class != api.ClassLB:
			bad = append(bad, fmt.Errorf("%s: class %q", p.Name, p.Class))
			continue
		case p.Port == 0:
			bad = append(bad, fmt.Errorf("%s: no port", p.Name))
			continue
		case p.HTTP2 != nil && !api.ValidHTTP2(p.HTTP2.Mode):
			bad = append(bad, fmt.Errorf("%s: http2 mode %q", p.Name, p.HTTP2.Mode))
			continue
		case p.DNS != nil && p.DNS.Query != "" && !validDNSName(p.DNS.Query):
			bad = append(bad, fmt.Errorf("%s: dns query %.64q is no DNS name", p.Name, p.DNS.Query))
			continue
		}
		t := Target{Name: p.Name, Class: p.Class, Port: p.Port, Labels: p.Labels, Backends: p.Backends, DNS: dnsQuery(p.DNS), DNSOnly: p.DNS != nil && p.DNS.Only}
		if h := p.HTTP2; h != nil {
			t.HTTP2 = HTTP2{Mode: h.Mode, CAFile: caFile(i, h), ServerName: h.ServerName, InsecureSkipVerify: h.InsecureSkipVerify}
		}
		for _, addr := range addrs {
			t.Addr = addr
			out = append(out, t) // a dual-stack peer: one target per family
		}
	}
	return out, bad
}

// peerAddrs are a peer's addresses: Address, and the other family's from
// Addresses; at most one per family.
func peerAddrs(p api.Peer) ([]netip.Addr, error) {
	var out []netip.Addr
	for i, s := range append([]string{p.Address}, p.Addresses...) {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" || a.IsUnspecified() {
			return nil, fmt.Errorf("address %q is not a unicast IP address", s)
		}
		a = a.Unmap()
		if i > 0 && a == out[0] {
			continue // Addresses may repeat Address
		}
		if slices.ContainsFunc(out, func(b netip.Addr) bool { return api.FamilyOf(a) == api.FamilyOf(b) }) {
			return nil, fmt.Errorf("addresses %v: more than one %s address", append([]string{p.Address}, p.Addresses...), api.FamilyOf(a))
		}
		out = append(out, a)
	}
	return out, nil
}

func validDNSName(name string) bool {
	_, err := probe.CheckDNSName(name)
	return err == nil
}
