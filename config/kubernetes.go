package config

import (
	"cmp"
	"fmt"
	"net/netip"
	"regexp"
)

// Discovery modes: where an agent's targets come from.
const (
	// DiscoveryStatic probes the targets list of the config file.
	DiscoveryStatic = "static"
	// DiscoveryKubernetes watches the cluster's Nodes, prober Pods and
	// load balancers (package peers); see docs/kubernetes.md.
	DiscoveryKubernetes = "kubernetes"
)

// Kubernetes configures discovery: kubernetes. Every field has a default
// matching deploy/daemonset.yaml.
type Kubernetes struct {
	// Kubeconfig is a kubeconfig file; empty means in-cluster (the pod's
	// ServiceAccount).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Namespace holds the agent Pods of both DaemonSets.
	Namespace string `json:"namespace,omitempty"`
	// NodeAgentSelector and PodAgentSelector are label selectors for the
	// Pods of the prober-node (hostNetwork) and prober-pod DaemonSets.
	NodeAgentSelector string `json:"nodeAgentSelector,omitempty"`
	PodAgentSelector  string `json:"podAgentSelector,omitempty"`
	// RackLabel is the Node label key naming a node's rack or ToR switch,
	// reported as the rack label of node and pod targets; empty for none.
	// The zone always comes from topology.kubernetes.io/zone.
	RackLabel string `json:"rackLabel,omitempty"`
	// APIServerLB is the external API server address (IP:port) kubelets
	// use, probed as the lb target apiserver-lb; empty for none.
	APIServerLB string `json:"apiServerLB,omitempty"`
	// AgentPort is the port node and pod targets are probed on: the
	// agents' listen port.
	AgentPort int `json:"agentPort,omitempty"`
	// APIServerCAFile holds the PEM CAs that verify the API server when
	// node agents ping it over TLS (http2_ping) through the kubernetes
	// Service and apiServerLB; empty means DefaultAPIServerCAFile (see
	// APIServerCA). Agents only.
	APIServerCAFile string `json:"apiServerCAFile,omitempty"`
}

// Kubernetes discovery defaults, as in deploy/daemonset.yaml.
const (
	DefaultNamespace         = "prober"
	DefaultNodeAgentSelector = "app.kubernetes.io/name=prober,app.kubernetes.io/component=node"
	DefaultPodAgentSelector  = "app.kubernetes.io/name=prober,app.kubernetes.io/component=pod"
	// DefaultAPIServerCAFile is the CA of the pod's ServiceAccount, which
	// signs the API server's certificate: kubernetes.apiServerCAFile's
	// default.
	DefaultAPIServerCAFile = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// KubernetesDiscovery reports whether targets come from the cluster.
func (c *Agent) KubernetesDiscovery() bool { return c.Discovery == DiscoveryKubernetes }

// SetDefaults fills the unset fields.
func (k *Kubernetes) SetDefaults() {
	if k.Namespace == "" {
		k.Namespace = DefaultNamespace
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
}

// APIServerCA is the file of CAs that verify the API server:
// apiServerCAFile, else the ServiceAccount's CA. SetDefaults leaves the
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
			return fmt.Errorf("kubernetes.apiServerCAFile: %w (the default, the ServiceAccount's CA, exists in a pod; elsewhere set kubernetes.apiServerCAFile)", err)
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

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// validateDiscovery reports the discovery problems through bad. Label
// selectors are parsed by package peers at start (config does not import
// k8s.io/*); here they only have to be set.
func (c *Agent) validateDiscovery(bad func(field, format string, args ...any)) {
	if !validateDiscoveryKind(c.Discovery, c.Kubernetes, bad) {
		return
	}
	if len(c.Targets) > 0 {
		bad("targets", "must be empty with discovery: kubernetes (the external API server address goes in kubernetes.apiServerLB)")
	}
	c.Kubernetes.validate(bad)
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

// validate checks the kubernetes block; SetDefaults has run.
func (k *Kubernetes) validate(bad func(field, format string, args ...any)) {
	if !dnsLabel.MatchString(k.Namespace) {
		bad("kubernetes.namespace", "%q is not a namespace name", k.Namespace)
	}
	if k.AgentPort < 1 || k.AgentPort > 65535 {
		bad("kubernetes.agentPort", "%d not in 1..65535", k.AgentPort)
	}
	if k.APIServerLB != "" {
		if ap, err := netip.ParseAddrPort(k.APIServerLB); err != nil || !ap.Addr().Is4() || ap.Port() == 0 {
			bad("kubernetes.apiServerLB", "%q is not an IPv4:port such as 203.0.113.10:6443", k.APIServerLB)
		}
	}
	if k.APIServerCAFile != "" {
		if err := checkCAFile(k.APIServerCAFile); err != nil {
			bad("kubernetes.apiServerCAFile", "%v", err)
		}
	}
}
