package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/tlsfiles/tlsfilestest"
)

// handshake serves one TLS handshake with srv on loopback and returns the
// client's error and the serial of the certificate it saw.
func handshake(t *testing.T, srv, cli *tls.Config) (string, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		s := tls.Server(c, srv)
		_ = s.SetDeadline(time.Now().Add(5 * time.Second))
		_ = s.Handshake()
	}()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cli)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	f := tlsfilestest.Write(t, dir, "prober-matrix.prober.svc")
	var failed []error
	srv, err := NewServer(f.Cert, f.Key, func(err error) { failed = append(failed, err) })
	if err != nil {
		t.Fatal(err)
	}
	roots, err := NewRoots(f.CA, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	srv.w.now = func() time.Time { return clock }
	roots.w.now = srv.w.now

	first, err := handshake(t, srv.Config(), roots.Config("prober-matrix.prober.svc"))
	if err != nil {
		t.Fatalf("verified handshake: %v", err)
	}
	if _, err := handshake(t, srv.Config(), roots.Config("other.prober.svc")); err == nil {
		t.Fatal("a certificate for prober-matrix.prober.svc was accepted for other.prober.svc")
	}
	// A client with the system's CAs only refuses the test CA's certificate.
	if _, err := handshake(t, srv.Config(), &tls.Config{ServerName: "prober-matrix.prober.svc"}); err == nil {
		t.Fatal("the test CA's certificate was accepted without its bundle")
	}

	// Rotated: the files are looked at again only after Every.
	tlsfilestest.Write(t, dir, "prober-matrix.prober.svc")
	if again, err := handshake(t, srv.Config(), roots.Config("prober-matrix.prober.svc")); err != nil || again != first {
		t.Fatalf("within %v of the last look: serial %s, %v; want the first certificate %s still", Every, again, err, first)
	}
	clock = clock.Add(Every)
	second, err := handshake(t, srv.Config(), roots.Config("prober-matrix.prober.svc"))
	if err != nil || second == first {
		t.Fatalf("after rotation: serial %s (first %s), %v; want the new certificate, verified by the new CA", second, first, err)
	}

	// A half-written pair keeps the last good one serving and says why.
	if err := os.WriteFile(f.Key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(Every)
	if got, err := handshake(t, srv.Config(), roots.Config("prober-matrix.prober.svc")); err != nil || got != second {
		t.Fatalf("with a bad key file: serial %s, %v; want the last good certificate %s", got, err, second)
	}
	if len(failed) != 1 || !strings.Contains(failed[0].Error(), f.Key) {
		t.Fatalf("failures reported: %v; want one naming %s", failed, f.Key)
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	f := tlsfilestest.Write(t, dir, "198.51.100.1")
	if _, err := NewServer(f.Cert, dir+"/missing.key", nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing key: %v", err)
	}
	if _, err := NewServer(f.CA, f.Key, nil); err == nil {
		t.Error("a key that is not the certificate's was accepted")
	}
	if _, err := NewRoots(f.Key, nil); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a key as a CA bundle: %v", err)
	}
	// An IP address as the server name verifies against IP SANs.
	srv, err := NewServer(f.Cert, f.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := NewRoots(f.CA, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handshake(t, srv.Config(), roots.Config("198.51.100.1")); err != nil {
		t.Errorf("IP SAN: %v", err)
	}
	var unknown x509.UnknownAuthorityError
	other, _ := NewRoots(tlsfilestest.Write(t, t.TempDir(), "x").CA, nil)
	if _, err := handshake(t, srv.Config(), other.Config("198.51.100.1")); !errors.As(err, &unknown) {
		t.Errorf("another CA: %v; want an unknown authority", err)
	}
}
