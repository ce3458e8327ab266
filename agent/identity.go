package agent

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Identity is who this agent is, from the downward API:
//
//	env:
//	- {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
//	- {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
//	- {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
//	- {name: POD_IPS, valueFrom: {fieldRef: {fieldPath: status.podIPs}}}
//
// POD_IPS is optional: on a dual-stack cluster it lists the pod's (under
// hostNetwork, the node's) address of each family, comma-separated.
type Identity struct {
	NodeName string
	PodName  string
	PodIP    netip.Addr
	// PodIPs are POD_IPS, at most one per family, PodIP first; just
	// PodIP without POD_IPS.
	PodIPs []netip.Addr
}

// IdentityFromEnv reads NODE_NAME, POD_NAME and POD_IP through getenv
// (os.Getenv in production) and reports every missing or bad one.
func IdentityFromEnv(getenv func(string) string) (Identity, error) {
	var id Identity
	var errs []error
	id.NodeName = getenv("NODE_NAME")
	if id.NodeName == "" {
		errs = append(errs, errors.New("NODE_NAME is not set (downward API fieldPath spec.nodeName)"))
	}
	id.PodName = getenv("POD_NAME")
	if id.PodName == "" {
		errs = append(errs, errors.New("POD_NAME is not set (downward API fieldPath metadata.name)"))
	}
	if s := getenv("POD_IP"); s == "" {
		errs = append(errs, errors.New("POD_IP is not set (downward API fieldPath status.podIP)"))
	} else if a, err := netip.ParseAddr(s); err != nil {
		errs = append(errs, fmt.Errorf("POD_IP %q is not an IP address", s))
	} else {
		id.PodIP = a.Unmap()
		id.PodIPs = []netip.Addr{id.PodIP}
	}
	for f := range strings.SplitSeq(getenv("POD_IPS"), ",") {
		a, err := netip.ParseAddr(strings.TrimSpace(f))
		if f == "" || err != nil || !id.PodIP.IsValid() {
			continue // optional: POD_IP alone still makes an agent
		}
		a = a.Unmap()
		if !slices.ContainsFunc(id.PodIPs, func(b netip.Addr) bool { return a.Is4() == b.Is4() }) {
			id.PodIPs = append(id.PodIPs, a)
		}
	}
	return id, errors.Join(errs...)
}
