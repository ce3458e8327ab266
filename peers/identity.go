package peers

import (
	"errors"
	"fmt"
	"net/netip"
)

// Identity is who this agent is, from the downward API:
//
//	env:
//	- {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
//	- {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
//	- {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
type Identity struct {
	NodeName string
	PodName  string
	PodIP    netip.Addr
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
		id.PodIP = a
	}
	return id, errors.Join(errs...)
}
