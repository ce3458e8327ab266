package lab

import (
	"context"
	"net"
	"net/http"
	"time"
)

// DialContext returns a dial function whose sockets are created inside
// namespace ns, for clients that run in this process but must talk from a
// lab host (an http.Transport's DialContext, a gRPC dialer).
func DialContext(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := Do(ns, func() (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// HTTPClient returns an HTTP client whose connections start in namespace
// ns. It ignores proxy environment variables: a lab address must never be
// sent to a proxy outside the lab.
func HTTPClient(ns string, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         DialContext(ns),
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}
