package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/netprober/prober/api"
)

// Host classes: a node runs the node-class agent, a pod the pod-class one;
// the control plane runs a Kubernetes control plane and no agent.
const (
	ClassNode         = api.ClassNode
	ClassPod          = api.ClassPod
	ClassControlPlane = "controlplane"
)

// Router kinds.
const (
	KindSpine = "spine"
	KindToR   = "tor"
	KindLB    = "lb"
	// Three tiers (Spec.SuperSpines): aggregation switches and
	// super-spines.
	KindAgg   = "agg"
	KindSuper = "super"
)

// routerKinds are every router kind.
func routerKinds() []string { return []string{KindSpine, KindToR, KindLB, KindAgg, KindSuper} }

// isSwitch reports whether routers of kind forward between hosts (all
// but the LB): what SilentRouters silences.
func isSwitch(kind string) bool { return kind != KindLB && slices.Contains(routerKinds(), kind) }

// Host is a node or a pod: a namespace that runs an agent.
type Host struct {
	Name      string     `json:"name"`      // "n21" (rack 2, node 1), "n21p1"
	Namespace string     `json:"namespace"` // "plab-n21"
	Addr      netip.Addr `json:"addr"`
	Rack      string     `json:"rack"`  // "r2"
	Zone      string     `json:"zone"`  // "z2"
	Node      string     `json:"node"`  // the node itself, or the pod's node
	Class     string     `json:"class"` // ClassNode or ClassPod
	// PodCIDR is the prefix the fabric routes to a node for its pods
	// (lab pods, or a CNI's with Spec.PodCIDRs); invalid otherwise.
	PodCIDR netip.Prefix `json:"pod_cidr,omitzero"`
	// Addr6 and PodCIDR6 are the IPv6 twins of Addr and PodCIDR, from
	// LabRange6, with Spec.IPv6; invalid otherwise.
	Addr6    netip.Addr   `json:"addr6,omitzero"`
	PodCIDR6 netip.Prefix `json:"pod_cidr6,omitzero"`
	// Tunnel and Tunnel6 are a node's overlay addresses (Spec.Overlay):
	// its flannel.1's, the first of its pod CIDR, as flannel numbers it.
	// A pod's trace to a pod of another node hears that node from it.
	Tunnel  netip.Addr `json:"tunnel,omitzero"`
	Tunnel6 netip.Addr `json:"tunnel6,omitzero"`
}

// Router is a spine, a ToR or the LB; in three tiers an aggregation
// switch or a super-spine.
type Router struct {
	Name       string      `json:"name"` // "spine1", "tor2", "lb", "agg12", "super1"
	Kind       string      `json:"kind"`
	Namespace  string      `json:"namespace"`
	Interfaces []Interface `json:"interfaces"`
}

// Interface is one addressed interface of a router.
type Interface struct {
	Name string       `json:"name"` // in the router's namespace: "spine1", "tor2", "br0", "lo"
	Addr netip.Prefix `json:"addr"`
	// Addr6 is the interface's IPv6 address with Spec.IPv6.
	Addr6 netip.Prefix `json:"addr6,omitzero"`
	// Peer is the device at the other end of a point-to-point link, ""
	// for the rack bridge and loopback.
	Peer string `json:"peer,omitempty"`
}

// Fabric is the inventory of a lab. Up returns it and persists it as JSON
// under StateDir, so that another process can Load it.
type Fabric struct {
	Spec    Spec     `json:"spec"`
	Hosts   []Host   `json:"hosts"`
	Routers []Router `json:"routers"`
	// VIP is the LB's virtual IP; the zero Addr without an LB.
	VIP netip.Addr `json:"vip"`
	// LBSource is the LB-owned address the LB SNATs to (one-arm LB).
	LBSource netip.Addr `json:"lb_source"`
	// Backends are the VIP's DNAT targets: every node, or the control
	// plane.
	Backends []netip.Addr `json:"backends,omitempty"`
	// VIP6, LBSource6 and Backends6 are their IPv6 twins, with Spec.IPv6
	// and an LB.
	VIP6      netip.Addr   `json:"vip6,omitzero"`
	LBSource6 netip.Addr   `json:"lb_source6,omitzero"`
	Backends6 []netip.Addr `json:"backends6,omitempty"`
	// ControlPlane is the control plane's namespace (Spec.ControlPlane),
	// nil without one. It is no agent host, so not in Hosts.
	ControlPlane *Host `json:"control_plane,omitempty"`

	logger *slog.Logger
	// holds are the delay faults this Fabric holds in this process:
	// Clear stops them. Up and Load make it.
	holds *holdSet
}

// holdSet is a Fabric's running delays (delay_linux.go).
type holdSet struct {
	mu   sync.Mutex
	list []*delayer
}

// StateDir holds one <prefix>.json inventory per running lab.
const StateDir = "/run/prober-lab"

func statePath(prefix string) string { return filepath.Join(StateDir, prefix+".json") }

// Hops maps every router interface address, IPv4 and IPv6, to its
// device name, and the VIPs and LB source addresses to "lb": the
// matrix's hops configuration.
func (f *Fabric) Hops() map[string]string {
	hops := make(map[string]string)
	name := func(a netip.Addr, device string) {
		if a.IsValid() {
			hops[a.String()] = device
		}
	}
	for _, r := range f.Routers {
		for _, ifc := range r.Interfaces {
			name(ifc.Addr.Addr(), r.Name)
			name(ifc.Addr6.Addr(), r.Name)
		}
	}
	for _, a := range []netip.Addr{f.VIP, f.LBSource, f.VIP6, f.LBSource6} {
		name(a, KindLB)
	}
	return hops
}

// Host returns the host (node or pod) called name, such as "n21".
func (f *Fabric) Host(name string) (Host, bool) {
	i := slices.IndexFunc(f.Hosts, func(h Host) bool { return h.Name == name })
	if i < 0 {
		return Host{}, false
	}
	return f.Hosts[i], true
}

// Router returns the router called name, such as "spine2".
func (f *Fabric) Router(name string) (Router, bool) {
	i := slices.IndexFunc(f.Routers, func(r Router) bool { return r.Name == name })
	if i < 0 {
		return Router{}, false
	}
	return f.Routers[i], true
}

// Nodes returns the hosts of class node, in rack order.
func (f *Fabric) Nodes() []Host {
	var nodes []Host
	for _, h := range f.Hosts {
		if h.Class == ClassNode {
			nodes = append(nodes, h)
		}
	}
	return nodes
}

// Namespace returns the namespace of the host or router called name
// ("n21", "spine2", "cp"), or name itself if it already is one of this lab's
// namespaces. Everything that enters a namespace goes through it, so
// nothing runs in a namespace the lab did not create.
func (f *Fabric) Namespace(name string) (string, error) {
	if h, ok := f.Host(name); ok {
		return h.Namespace, nil
	}
	if r, ok := f.Router(name); ok {
		return r.Namespace, nil
	}
	if cp := f.ControlPlane; cp != nil && cp.Name == name {
		return cp.Namespace, nil
	}
	for _, ns := range f.namespaces() {
		if ns == name {
			return ns, nil
		}
	}
	return "", fmt.Errorf("lab %s: no host, router or namespace %q (have %s)", f.Spec.Prefix, name, strings.Join(f.names(), ", "))
}

func (f *Fabric) namespaces() []string { return f.column(func(name, ns string) string { return ns }) }
func (f *Fabric) names() []string      { return f.column(func(name, ns string) string { return name }) }

// column maps every router, then every host, to one string.
func (f *Fabric) column(pick func(name, ns string) string) []string {
	var all []string
	for _, r := range f.Routers {
		all = append(all, pick(r.Name, r.Namespace))
	}
	for _, h := range f.Hosts {
		all = append(all, pick(h.Name, h.Namespace))
	}
	if cp := f.ControlPlane; cp != nil {
		all = append(all, pick(cp.Name, cp.Namespace))
	}
	return all
}

func (f *Fabric) save() error {
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	tmp := statePath(f.Spec.Prefix) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	if err := os.Rename(tmp, statePath(f.Spec.Prefix)); err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	return nil
}

// ErrNoLab means Load found no inventory for the prefix.
var ErrNoLab = errors.New("no lab with that prefix (run 'prober lab up')")

// Load reads the inventory that Up persisted for prefix, so that another
// process can inject faults into a running lab or start agents in it.
func Load(prefix string) (*Fabric, error) {
	b, err := os.ReadFile(statePath(prefix))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("lab %s: %w", prefix, ErrNoLab)
	}
	if err != nil {
		return nil, fmt.Errorf("lab %s: %w", prefix, err)
	}
	f := &Fabric{}
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("lab %s: %s: %w", prefix, statePath(prefix), err)
	}
	f.logger, f.holds = orDiscard(nil), &holdSet{}
	return f, nil
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
