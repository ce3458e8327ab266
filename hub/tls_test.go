package hub

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/config"
	"github.com/netprober/prober/tlsfiles"
	"github.com/netprober/prober/tlsfiles/tlsfilestest"
)

// TestServeTLS: with tls: the matrix serves every endpoint over TLS
// (HTTP/2 by ALPN), verified for its Service's name, and answers a
// plain-HTTP request with an error, not the endpoint.
func TestServeTLS(t *testing.T) {
	files := tlsfilestest.Write(t, t.TempDir(), "prober-matrix.prober.svc")
	h := newTestHub(t, []string{"http://192.0.2.200:9808"}, "node", func(c *config.Matrix) {
		c.TLS = &config.ServerTLS{CertFile: files.Cert, KeyFile: files.Key}
	})
	h.SetAgents(nil) // nothing is pulled
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	roots, err := tlsfiles.NewRoots(files.CA, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: roots.Config("prober-matrix.prober.svc"), ForceAttemptHTTP2: true}}
	resp, err := c.Get("https://" + h.Addr().String() + "/metrics")
	if err != nil {
		t.Fatalf("/metrics over TLS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || !strings.Contains(string(body), "prober_matrix_") {
		t.Errorf("/metrics over TLS: %s %s, %d bytes; want 200 over HTTP/2 with the matrix's metrics", resp.Proto, resp.Status, len(body))
	}
	plain, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + h.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(plain.Body)
	plain.Body.Close()
	if plain.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "prober_matrix_") {
		t.Errorf("plain HTTP to the TLS port: %s %q; want 400 without the metrics", plain.Status, body)
	}

	// A key that is not the certificate's is refused at start, named.
	bad := *h.cfg
	bad.TLS = &config.ServerTLS{CertFile: files.Cert, KeyFile: tlsfilestest.Write(t, t.TempDir(), "x").Key}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "tls.certFile") {
		t.Errorf("mismatched key: Validate said %v", err)
	}
	if _, err := New(&bad, slog.New(slog.DiscardHandler), Options{}); err == nil || !strings.Contains(err.Error(), "tls:") {
		t.Errorf("mismatched key: New said %v", err)
	}
}
