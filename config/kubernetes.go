package config

import (
	"bytes"
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/netprober/prober/probe"
)

// Discovery modes: where an agent's targets come from.
const (
	// DiscoveryStatic probes the targets list of the config file.
	DiscoveryStatic = "static"
	// DiscoveryKubernetes watches the cluster's Nodes, prober Pods and
	// load balancers (package peers); see docs/kubernetes.md.
	DiscoveryKubernetes = "kubernetes"
)

// Kubernetes configures discovery: kubernetes. The matrix watches the
// cluster and plans who probes whom; an agent only finds the matrix and
// follows its plan, with no API credentials. Each field says whose it is;
// a field set on the wrong side is an error, not ignored.
type Kubernetes struct {
	// Kubeconfig is a kubeconfig file; empty means in-cluster (the pod's
	// ServiceAccount). Matrix only.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Namespace holds the agent Pods of both DaemonSets and the matrix's
	// Service.
	Namespace string `json:"namespace,omitempty"`
	// NodeAgentSelector and PodAgentSelector are label selectors for the
	// Pods of the prober-node (hostNetwork) and prober-pod DaemonSets.
	// Matrix only.
	NodeAgentSelector string `json:"nodeAgentSelector,omitempty"`
	PodAgentSelector  string `json:"podAgentSelector,omitempty"`
	// RackLabel is the Node label key naming a node's rack or ToR switch;
	// empty for none (then racks are inferred from the agents' first
	// hops). The zone always comes from topology.kubernetes.io/zone.
	// Matrix only.
	RackLabel string `json:"rackLabel,omitempty"`
	// APIServerLB is the external API server address (IP:port) kubelets
	// use, probed as the lb target apiserver-lb; empty for none. Matrix
	// only.
	APIServerLB string `json:"apiServerLB,omitempty"`
	// AgentPort is the agents' listen port, where the matrix pulls them
	// and node and pod targets are probed. Matrix only.
	AgentPort int `json:"agentPort,omitempty"`
	// Matrix is the matrix's base URL an agent follows its plan from;
	// empty means the prober-matrix Service of Namespace (see MatrixURL).
	// Agents only.
	Matrix string `json:"matrix,omitempty"`
	// MatrixCAFile holds the PEM CAs that verify the matrix's certificate:
	// set, the agent follows the matrix over TLS (https), by default at
	// the Service's DNS name, whatever address it dials. Empty: plain
	// HTTP, unless kubernetes.matrix is an https URL (verified with the
	// system's CAs). Agents only.
	MatrixCAFile string `json:"matrixCAFile,omitempty"`
	// APIServerCAFile holds the PEM CAs that verify the API server when
	// node agents ping it over TLS (http2_ping) through the kubernetes
	// Service and apiServerLB; empty means DefaultAPIServerCAFile (see
	// APIServerCA). Agents only.
	APIServerCAFile string `json:"apiServerCAFile,omitempty"`
	// TokenFile is the projected ServiceAccount token (audience
	// api.AgentTokenAudience) the agent proves itself to the matrix with;
	// empty means DefaultTokenFile. Agents only.
	TokenFile string `json:"tokenFile,omitempty"`
	// AgentAuth is how the matrix authenticates agents' long-polls:
	// token (their projected ServiceAccount tokens, verified against the
	// API server's signing keys) or none. Matrix only.
	AgentAuth string `json:"agentAuth,omitempty"`
	// AgentServiceAccount is the agents' ServiceAccount, which their
	// tokens must name. Matrix only.
	AgentServiceAccount string `json:"agentServiceAccount,omitempty"`
	// PullKeySecretFile holds the secret the matrix derives the agents'
	// pull keys from; empty: a random one per process. Replicas of the
	// matrix share it (a Secret mounted in each), so that an agent
	// answers every replica. Matrix only.
	PullKeySecretFile string `json:"pullKeySecretFile,omitempty"`
	// DNS is the cluster DNS every agent asks: its Service's VIP and
	// each of its endpoints. Matrix only.
	DNS *ClusterDNS `json:"dns,omitempty"`
	// NodeConditions has the matrix write what it finds onto the
	// cluster: a condition on a Node whose host is a listed suspect and
	// Events on it and on a Service a suspect names (docs/kubernetes.md).
	// Off unless enabled: it needs write access the matrix otherwise
	// lacks. Matrix only.
	NodeConditions *NodeConditions `json:"nodeConditions,omitempty"`
}

// NodeConditions configures the matrix's writes to the API server.
type NodeConditions struct {
	Enabled bool `json:"enabled,omitempty"`
	// WritesPerMinute bounds the condition patches and Events together,
	// in any minute, whatever the cluster's size: a monitor must never
	// become the API server's load. Default 6.
	WritesPerMinute int `json:"writesPerMinute,omitempty"`
}

// DefaultWritesPerMinute is nodeConditions.writesPerMinute's default.
const DefaultWritesPerMinute = 6

// maxWritesPerMinute bounds nodeConditions.writesPerMinute.
const maxWritesPerMinute = 120

// WritesNodeConditions reports whether the matrix writes Node conditions
// and Events.
func (k *Kubernetes) WritesNodeConditions() bool {
	return k != nil && k.NodeConditions != nil && k.NodeConditions.Enabled
}

// ClusterDNS is the cluster DNS discovery plans for every agent.
type ClusterDNS struct {
	// Service is its Service, namespace/name (default kube-system/kube-dns,
	// the name CoreDNS keeps for compatibility); none: no DNS probes.
	Service string `json:"service,omitempty"`
	// Query is the name asked (default probe.DefaultDNSQuery).
	Query string `json:"query,omitempty"`
}

// Cluster DNS defaults.
const (
	DefaultDNSService = "kube-system/kube-dns"
	DNSServiceNone    = "none"
)

// DNSService is the cluster DNS Service's namespace and name, ok false
// when none is probed. Valid after SetDefaults and Validate.
func (k *Kubernetes) DNSService() (namespace, name string, ok bool) {
	if k.DNS == nil || k.DNS.Service == DNSServiceNone {
		return "", "", false
	}
	return strings.Cut(k.DNS.Service, "/")
}

// Kubernetes discovery defaults, as in deploy/daemonset.yaml.
const (
	DefaultNamespace         = "prober"
	DefaultNodeAgentSelector = "app.kubernetes.io/name=prober,app.kubernetes.io/component=node"
	DefaultPodAgentSelector  = "app.kubernetes.io/name=prober,app.kubernetes.io/component=pod"
	// DefaultAPIServerCAFile is where deploy/ mounts the cluster's
	// kube-root-ca.crt ConfigMap, which holds the CA that signs the API
	// server's certificate: kubernetes.apiServerCAFile's default. Agents
	// mount no ServiceAccount token, so the token volume's ca.crt is not
	// there.
	DefaultAPIServerCAFile = "/etc/kube-root-ca/ca.crt"
	// MatrixService is the name of the matrix's Service.
	MatrixService = "prober-matrix"
	// DefaultTokenFile is where deploy/ projects the agents' token.
	DefaultTokenFile = "/var/run/secrets/prober/token"
	// AgentAuthToken and AgentAuthNone are the values of agentAuth.
	AgentAuthToken = "token"
	AgentAuthNone  = "none"
	// DefaultAgentServiceAccount is the agents' ServiceAccount in deploy/.
	DefaultAgentServiceAccount = "prober-agent"
	// DefaultMatrixPort is the matrix's listen port in deploy/.
	DefaultMatrixPort = 9809
)

// KubernetesDiscovery reports whether targets come from the cluster.
func (c *Agent) KubernetesDiscovery() bool { return c.Discovery == DiscoveryKubernetes }

// setAgentDefaults fills the unset fields an agent uses.
func (k *Kubernetes) setAgentDefaults() {
	k.setNamespace()
	if k.TokenFile == "" {
		k.TokenFile = DefaultTokenFile
	}
}

func (k *Kubernetes) setNamespace() {
	if k.Namespace == "" {
		k.Namespace = DefaultNamespace
	}
}

// SetDefaults fills the unset fields the matrix uses.
func (k *Kubernetes) SetDefaults() {
	k.setNamespace()
	if k.AgentAuth == "" {
		k.AgentAuth = AgentAuthToken
	}
	if k.AgentServiceAccount == "" {
		k.AgentServiceAccount = DefaultAgentServiceAccount
	}
	if k.NodeAgentSelector == "" {
		k.NodeAgentSelector = DefaultNodeAgentSelector
	}
	if k.PodAgentSelector == "" {
		k.PodAgentSelector = DefaultPodAgentSelector
	}
	if k.AgentPort == 0 {
		k.AgentPort = DefaultPort
	}
	if k.DNS == nil {
		k.DNS = &ClusterDNS{}
	}
	if k.DNS.Service == "" {
		k.DNS.Service = DefaultDNSService
	}
	if k.DNS.Query == "" {
		k.DNS.Query = probe.DefaultDNSQuery
	}
	if k.NodeConditions != nil && k.NodeConditions.WritesPerMinute == 0 {
		k.NodeConditions.WritesPerMinute = DefaultWritesPerMinute
	}
}

// MatrixURL is the matrix's base URL for an agent: kubernetes.matrix,
// else the prober-matrix Service of the namespace by the address the
// kubelet put in the pod's environment (no DNS needed, which a
// hostNetwork pod may lack), else by its DNS name; https when
// matrixCAFile is set.
func (k *Kubernetes) MatrixURL(getenv func(string) string) string {
	if k.Matrix != "" {
		return strings.TrimSuffix(k.Matrix, "/")
	}
	scheme := "http"
	if k.MatrixCAFile != "" {
		scheme = "https"
	}
	env := strings.ToUpper(strings.ReplaceAll(MatrixService, "-", "_"))
	if host, port := getenv(env+"_SERVICE_HOST"), getenv(env+"_SERVICE_PORT"); host != "" && port != "" {
		return scheme + "://" + net.JoinHostPort(host, port)
	}
	return fmt.Sprintf("%s://%s:%d", scheme, k.MatrixServerName(), DefaultMatrixPort)
}

// MatrixServerName is the name the matrix's certificate is verified
// for: kubernetes.matrix's host, else the Service's DNS name (the
// agent may dial its ClusterIP, which no certificate made before the
// Service can name).
func (k *Kubernetes) MatrixServerName() string {
	if k.Matrix != "" {
		if u, err := url.Parse(k.Matrix); err == nil {
			return u.Hostname()
		}
	}
	return fmt.Sprintf("%s.%s.svc", MatrixService, k.Namespace)
}

// APIServerCA is the file of CAs that verify the API server:
// apiServerCAFile, else DefaultAPIServerCAFile. SetDefaults leaves the
// field empty on purpose: the default exists only inside a pod, so
// Validate (and --check, wherever it runs) reads the file only when the
// config names it, and the agent checks the default at start
// (CheckAPIServerCA).
func (k *Kubernetes) APIServerCA() string { return cmp.Or(k.APIServerCAFile, DefaultAPIServerCAFile) }

// CheckAPIServerCA reads APIServerCA as the HTTP/2 pinger will, naming
// the field and, for the default, how to replace it.
func (k *Kubernetes) CheckAPIServerCA() error {
	if err := checkCAFile(k.APIServerCA()); err != nil {
		if k.APIServerCAFile == "" {
			return fmt.Errorf("kubernetes.apiServerCAFile: %w (the default, the kube-root-ca.crt ConfigMap deploy/ mounts, exists in a pod; elsewhere set kubernetes.apiServerCAFile)", err)
		}
		return fmt.Errorf("kubernetes.apiServerCAFile: %w", err)
	}
	return nil
}

// APIServerLBAddr is the parsed APIServerLB, invalid when unset. Valid
// after Validate.
func (k *Kubernetes) APIServerLBAddr() netip.AddrPort {
	ap, _ := netip.ParseAddrPort(k.APIServerLB)
	return ap
}

var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
)

// validateDiscovery reports the discovery problems through bad. Label
// selectors are parsed by package peers at start (config does not import
// k8s.io/*); here they only have to be set.
func (c *Agent) validateDiscovery(bad func(field, format string, args ...any)) {
	if !validateDiscoveryKind(c.Discovery, c.Kubernetes, bad) {
		return
	}
	if len(c.Targets) > 0 {
		bad("targets", "must be empty with discovery: kubernetes (the matrix plans the targets; the external API server address goes in the matrix's kubernetes.apiServerLB)")
	}
	c.Kubernetes.validateAgent(bad)
}

// validateDiscoveryKind checks discovery against the kubernetes block and
// reports whether discovery is kubernetes (so the block is to be checked).
func validateDiscoveryKind(discovery string, k *Kubernetes, bad func(field, format string, args ...any)) bool {
	switch discovery {
	case DiscoveryStatic:
		if k != nil {
			bad("kubernetes", "set, but discovery is static (add discovery: kubernetes)")
		}
		return false
	case DiscoveryKubernetes:
		return true
	default:
		bad("discovery", "%q not one of static, kubernetes", discovery)
		return false
	}
}

// validateAgent checks an agent's kubernetes block.
func (k *Kubernetes) validateAgent(bad func(field, format string, args ...any)) {
	k.validateNamespace(bad)
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"kubeconfig", k.Kubeconfig != ""}, {"nodeAgentSelector", k.NodeAgentSelector != ""},
		{"podAgentSelector", k.PodAgentSelector != ""}, {"rackLabel", k.RackLabel != ""},
		{"apiServerLB", k.APIServerLB != ""}, {"agentPort", k.AgentPort != 0},
		{"agentAuth", k.AgentAuth != ""}, {"agentServiceAccount", k.AgentServiceAccount != ""},
		{"pullKeySecretFile", k.PullKeySecretFile != ""}, {"dns", k.DNS != nil},
		{"nodeConditions", k.NodeConditions != nil},
	} {
		if f.set {
			bad("kubernetes."+f.name, "the matrix's setting: agents read no API and plan nothing; move it to the matrix config (docs/kubernetes.md)")
		}
	}
	if k.Matrix != "" {
		if u, err := url.Parse(k.Matrix); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			bad("kubernetes.matrix", "%q is not a base URL such as http://prober-matrix.prober.svc:9809", k.Matrix)
		}
	}
	if k.APIServerCAFile != "" {
		if err := checkCAFile(k.APIServerCAFile); err != nil {
			bad("kubernetes.apiServerCAFile", "%v", err)
		}
	}
	if k.MatrixCAFile != "" {
		if err := checkCAFile(k.MatrixCAFile); err != nil {
			bad("kubernetes.matrixCAFile", "%v", err)
		}
		if strings.HasPrefix(k.Matrix, "http://") {
			bad("kubernetes.matrixCAFile", "verifies the matrix over TLS, but kubernetes.matrix %q is plain http: make it https, or drop matrixCAFile to follow in the clear", k.Matrix)
		}
	}
}

// validateMatrix checks the matrix's kubernetes block; SetDefaults has run.
func (k *Kubernetes) validateMatrix(bad func(field, format string, args ...any)) {
	k.validateNamespace(bad)
	if k.AgentPort < 1 || k.AgentPort > 65535 {
		bad("kubernetes.agentPort", "%d not in 1..65535", k.AgentPort)
	}
	if k.APIServerLB != "" {
		if ap, err := netip.ParseAddrPort(k.APIServerLB); err != nil || !ap.Addr().Is4() || ap.Port() == 0 {
			bad("kubernetes.apiServerLB", "%q is not an IPv4:port such as 203.0.113.10:6443", k.APIServerLB)
		}
	}
	if k.Matrix != "" || k.APIServerCAFile != "" || k.TokenFile != "" || k.MatrixCAFile != "" {
		bad("kubernetes", "matrix, matrixCAFile, apiServerCAFile and tokenFile are agents' settings; the matrix config takes none of them")
	}
	if k.AgentAuth != AgentAuthToken && k.AgentAuth != AgentAuthNone {
		bad("kubernetes.agentAuth", "%q not one of %s, %s", k.AgentAuth, AgentAuthToken, AgentAuthNone)
	}
	if !dnsSubdomain.MatchString(k.AgentServiceAccount) {
		bad("kubernetes.agentServiceAccount", "%q is not a ServiceAccount name", k.AgentServiceAccount)
	}
	if k.PullKeySecretFile != "" {
		if _, err := k.PullKeySecret(); err != nil {
			bad("kubernetes.pullKeySecretFile", "%v", err)
		}
	}
	if d := k.DNS; d != nil {
		if ns, name, ok := strings.Cut(d.Service, "/"); d.Service != DNSServiceNone && (!ok || !dnsLabel.MatchString(ns) || !dnsLabel.MatchString(name)) {
			bad("kubernetes.dns.service", "%q is not namespace/name such as %s, or %s", d.Service, DefaultDNSService, DNSServiceNone)
		}
		if _, err := probe.CheckDNSName(d.Query); err != nil {
			bad("kubernetes.dns.query", "%v", err)
		}
	}
	if nc := k.NodeConditions; nc != nil && (nc.WritesPerMinute < 1 || nc.WritesPerMinute > maxWritesPerMinute) {
		bad("kubernetes.nodeConditions.writesPerMinute", "%d not in 1..%d: a bound on the matrix's writes to the API server", nc.WritesPerMinute, maxWritesPerMinute)
	}
}

func (k *Kubernetes) validateNamespace(bad func(field, format string, args ...any)) {
	if !dnsLabel.MatchString(k.Namespace) {
		bad("kubernetes.namespace", "%q is not a namespace name", k.Namespace)
	}
}

// minPullKeySecret is the shortest secret pullKeySecretFile may hold.
const minPullKeySecret = 32

// PullKeySecret reads PullKeySecretFile: at least 32 bytes, surrounding
// whitespace dropped (a Secret written with echo ends in a newline).
func (k *Kubernetes) PullKeySecret() ([]byte, error) {
	b, err := os.ReadFile(k.PullKeySecretFile)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) < minPullKeySecret {
		return nil, fmt.Errorf("%s: %d bytes, want at least %d (head -c 48 /dev/urandom | base64)", k.PullKeySecretFile, len(b), minPullKeySecret)
	}
	return b, nil
}
