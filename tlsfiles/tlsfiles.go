package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Every is how often, at most, the files are looked at again.
const Every = 5 * time.Second

// stamp is what says a file changed: a mounted Secret's update swaps a
// symlink, so the target's size and time change with its content.
type stamp struct {
	size int64
	mod  time.Time
}

func stat(names ...string) ([]stamp, error) {
	out := make([]stamp, len(names))
	for i, n := range names {
		fi, err := os.Stat(n)
		if err != nil {
			return nil, err
		}
		out[i] = stamp{fi.Size(), fi.ModTime()}
	}
	return out, nil
}

// watched holds a value built from files and rebuilds it when they change.
type watched[T any] struct {
	names []string
	build func() (T, error)
	// failed is told a rebuild's error once per change of the files.
	failed func(error)
	now    func() time.Time

	mu      sync.Mutex
	val     T
	stamps  []stamp
	checked time.Time
}

func (w *watched[T]) get() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if now.Sub(w.checked) < Every {
		return w.val
	}
	w.checked = now
	st, err := stat(w.names...)
	if err != nil || equal(st, w.stamps) {
		return w.val
	}
	w.stamps = st
	v, err := w.build()
	if err != nil {
		if w.failed != nil {
			w.failed(err)
		}
		return w.val
	}
	w.val = v
	return v
}

func equal(a, b []stamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].size != b[i].size || !a[i].mod.Equal(b[i].mod) {
			return false
		}
	}
	return true
}

// newWatched builds the first value now: a file that is missing or bad at
// start is an error, not a server without a certificate.
func newWatched[T any](build func() (T, error), failed func(error), names ...string) (*watched[T], error) {
	w := &watched[T]{names: names, build: build, failed: failed, now: time.Now}
	st, err := stat(names...)
	if err != nil {
		return nil, err
	}
	v, err := build()
	if err != nil {
		return nil, err
	}
	w.val, w.stamps, w.checked = v, st, w.now()
	return w, nil
}

// Server is a server's certificate and key, from files.
type Server struct{ w *watched[*tls.Certificate] }

// NewServer reads certFile and keyFile; failed, when set, is told when a
// changed pair cannot be loaded (the last good one keeps serving).
func NewServer(certFile, keyFile string, failed func(error)) (*Server, error) {
	w, err := newWatched(func() (*tls.Certificate, error) {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", certFile, keyFile, err)
		}
		return &c, nil
	}, failed, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &Server{w: w}, nil
}

// Config is a server's TLS config serving the current certificate,
// TLS 1.2 at least.
func (s *Server) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.w.get(), nil
		},
	}
}

// Roots is a CA bundle from a file.
type Roots struct{ w *watched[*x509.CertPool] }

// NewRoots reads the PEM CAs in file; failed as for NewServer.
func NewRoots(file string, failed func(error)) (*Roots, error) {
	w, err := newWatched(func() (*x509.CertPool, error) {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s: no PEM certificate in it", file)
		}
		return p, nil
	}, failed, file)
	if err != nil {
		return nil, err
	}
	return &Roots{w: w}, nil
}

// Config is a client's TLS config that verifies the server's chain
// against the current bundle for serverName, whatever address is dialled.
// The standard check is replaced, not skipped: a bundle that changes
// must be read at each handshake, which RootCAs cannot.
func (r *Roots) Config(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         serverName,
		InsecureSkipVerify: true, // VerifyConnection below verifies
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: r.w.get(), DNSName: serverName, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		},
	}
}
