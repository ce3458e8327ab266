package probe

import (
	"errors"
	"fmt"
	"syscall"
)

// privilegeError turns a permission failure into the one actionable line
// an operator needs.
func privilegeError(proto string, err error) error {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("%s probe needs CAP_NET_RAW (run as root or add NET_RAW to securityContext.capabilities.add): %w", proto, err)
	}
	return fmt.Errorf("%s raw socket: %w", proto, err)
}

// ReasonRejected is the reason of a probe this host's own firewall
// refused to send: a send on a raw socket, whose opening already proved
// CAP_NET_RAW, fails with EPERM only on a netfilter verdict, such as
// kube-proxy's REJECT of a Service that has no endpoints.
const ReasonRejected = "rejected"

// sendReason maps a send error to a bounded metric label.
func sendReason(err error) string {
	switch {
	case errors.Is(err, syscall.EPERM):
		return ReasonRejected
	case errors.Is(err, syscall.EACCES):
		return "permission"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "no_route"
	case errors.Is(err, syscall.ENOBUFS), errors.Is(err, syscall.EAGAIN):
		return "buffer"
	}
	return "send"
}

// joinChecks runs a Check method and joins what it reports, each problem
// as "field: message".
func joinChecks(check func(bad func(field, format string, args ...any))) error {
	var errs []error
	check(func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	})
	return errors.Join(errs...)
}
