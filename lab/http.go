package lab

import (
	"context"
	"net"
	"net/http"
	"time"
)

// HTTPClient returns a client whose connections are opened inside the
// namespace ns, so a process in the root namespace can read the agents'
// endpoints. The dial runs on a thread switched into ns (see Do); the
// socket stays in ns after the thread switches back.
func HTTPClient(ns string, timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: timeout}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := Do(ns, func() error {
				var err error
				c, err = d.DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}
