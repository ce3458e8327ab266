package probe

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"golang.org/x/net/http2"
)

// ResponderConfig configures NewResponder.
type ResponderConfig struct {
	// Listen is the address the server will listen on. Only its host is
	// used: it names the generated self-signed certificate.
	Listen string
	// TLS, when set, makes the server speak TLS (ALPN h2 and http/1.1)
	// instead of cleartext HTTP/1.1 and h2c.
	TLS    *ResponderTLS
	Logger *slog.Logger
}

// ResponderTLS is the responder's certificate. With CertFile and KeyFile
// empty, NewResponder generates a self-signed ECDSA P-256 pair valid for
// the listen address and Hosts; probers of such a responder need
// insecureSkipVerify, or the certificate as their CA file.
type ResponderTLS struct {
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
	// Hosts are extra DNS names or IP addresses for a generated
	// certificate (the node name, the pod IP).
	Hosts []string `json:"hosts,omitempty"`
}

// responderLimits are the server's resource limits. They are not
// configuration: tests shorten them to watch them act.
type responderLimits struct {
	readHeader time.Duration // HTTP/1 headers, the h2c preface and the TLS handshake
	read       time.Duration // an HTTP/1 request; an HTTP/2 request body
	write      time.Duration // one response
	idle       time.Duration // an HTTP/1.1 keep-alive connection between requests

	// h2Idle is the HTTP/2 idle timeout, apart from HTTP/1's on purpose.
	// x/net/http2's server arms its idle timer once the client preface is
	// read, stops it when a HEADERS frame opens a stream and re-arms it
	// when the last stream closes; PING, SETTINGS and WINDOW_UPDATE never
	// touch it (its doc: "PING frames are not considered activity for the
	// purposes of IdleTimeout"). A connection that only carries probe
	// PINGs therefore gets GOAWAY(NO_ERROR) h2Idle after it opened, however
	// often it pings (TestResponderIdleIgnoresPings pins this). So h2Idle
	// is a day, not HTTP/1's two minutes: a pinger sees one "goaway" reset
	// per target per day and loses no probe over it (it redials before
	// pinging). Connections of dead peers go sooner, by h2ReadIdle.
	h2Idle time.Duration
	// h2ReadIdle and h2PingTimeout are the server's own health check: after
	// h2ReadIdle without any frame from the client it sends a PING and
	// closes the connection if no ACK comes within h2PingTimeout. Live
	// pingers never trigger it; it reaps connections whose peer vanished.
	h2ReadIdle    time.Duration
	h2PingTimeout time.Duration

	headerBytes  int    // HTTP/1 header bytes; HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE
	headerTable  uint32 // HPACK dynamic table, both directions
	streams      uint32 // concurrent streams per connection
	readFrame    uint32
	uploadBuffer int32 // flow-control window per connection and per stream
}

var defaultResponderLimits = responderLimits{
	readHeader:    5 * time.Second,
	read:          30 * time.Second,
	write:         30 * time.Second,
	idle:          2 * time.Minute,
	h2Idle:        24 * time.Hour,
	h2ReadIdle:    time.Minute,
	h2PingTimeout: 15 * time.Second,
	headerBytes:   16 << 10,
	headerTable:   4 << 10,
	streams:       16,       // /metrics, /healthz, observations: a handful at once
	readFrame:     16 << 10, // the protocol minimum
	uploadBuffer:  64 << 10, // requests are GETs
}

// NewResponder builds the agent's HTTP server around h (the agent's mux).
// Without TLS it serves HTTP/1.1 and h2c with prior knowledge on the same
// listener: call Serve. With TLS it negotiates h2 or http/1.1 by ALPN:
// call ServeTLS(ln, "", ""). Either way it answers HTTP/2 PINGs at any
// rate the agents send (the server has no ping-rate limit, unlike gRPC's
// too_many_pings; TestResponderPingRate holds it to 10/s).
//
// h2c comes from http.Server.Protocols (Go 1.24+), not x/net's h2c
// handler: h2c.NewHandler takes the connection over by hijacking it from
// inside an HTTP/1 handler, so the server stops tracking it: Shutdown
// neither sends it GOAWAY nor waits for it, and ConnState never sees it.
// h2c's Upgrade path also buffers a request body in memory. Protocols
// hands the connection to the HTTP/2 server straight after the preface,
// still tracked, with ReadHeaderTimeout bounding the wait for the
// preface. x/net's http2.ConfigureServer supplies the HTTP/2 side so that
// its idle timeout can differ from HTTP/1's (see responderLimits.h2Idle).
func NewResponder(h http.Handler, cfg ResponderConfig) (*http.Server, error) {
	return newResponder(h, cfg, defaultResponderLimits)
}

func newResponder(h http.Handler, cfg ResponderConfig, lim responderLimits) (*http.Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Addr:              cfg.Listen,
		Handler:           h,
		ReadHeaderTimeout: lim.readHeader,
		ReadTimeout:       lim.read,
		WriteTimeout:      lim.write,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    lim.headerBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		Protocols:         new(http.Protocols),
	}
	srv.Protocols.SetHTTP1(true)
	if cfg.TLS == nil {
		srv.Protocols.SetUnencryptedHTTP2(true)
	} else {
		cert, err := responderCert(cfg)
		if err != nil {
			return nil, err
		}
		srv.Protocols.SetHTTP2(true)
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	h2 := &http2.Server{
		MaxConcurrentStreams:         lim.streams,
		MaxDecoderHeaderTableSize:    lim.headerTable,
		MaxEncoderHeaderTableSize:    lim.headerTable,
		MaxReadFrameSize:             lim.readFrame,
		MaxUploadBufferPerConnection: lim.uploadBuffer,
		MaxUploadBufferPerStream:     lim.uploadBuffer,
		IdleTimeout:                  lim.h2Idle,
		ReadIdleTimeout:              lim.h2ReadIdle,
		PingTimeout:                  lim.h2PingTimeout,
		WriteByteTimeout:             lim.write,
	}
	if err := http2.ConfigureServer(srv, h2); err != nil {
		return nil, fmt.Errorf("http2 server: %w", err)
	}
	return srv, nil
}

func responderCert(cfg ResponderConfig) (tls.Certificate, error) {
	t := cfg.TLS
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("tls: certFile %s, keyFile %s: %w", t.CertFile, t.KeyFile, err)
		}
		return cert, nil
	case t.CertFile != "" || t.KeyFile != "":
		return tls.Certificate{}, errors.New("tls: certFile and keyFile go together: set both, or neither for a self-signed pair")
	}
	hosts := append(listenHosts(cfg.Listen), t.Hosts...)
	certPEM, keyPEM, err := SelfSignedCert(hosts, 365*24*time.Hour)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// listenHosts names a listen address for a certificate: its host if it
// has one, else (":8080", "0.0.0.0:8080") the host name and loopback.
func listenHosts(listen string) []string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	if a, err := netip.ParseAddr(host); (err == nil && !a.IsUnspecified()) || (err != nil && host != "") {
		return []string{host}
	}
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if name, err := os.Hostname(); err == nil {
		hosts = append(hosts, name)
	}
	return hosts
}

// SelfSignedCert returns a new self-signed ECDSA P-256 certificate for
// hosts (DNS names or IP addresses) and its key, PEM-encoded. The
// certificate is its own CA, so a prober can use it as its CA file.
func SelfSignedCert(hosts []string, validFor time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("generate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"prober"}, CommonName: "prober agent"},
		NotBefore:             now.Add(-time.Hour), // tolerate clock skew between nodes
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range hosts {
		if a, err := netip.ParseAddr(h); err == nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, a.AsSlice())
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}
