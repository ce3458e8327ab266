package tlsfiles

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/netprober/prober/tlsfiles/tlsfilestest"
)

// BenchmarkHandshake is one agent's connection to the matrix: a full
// TLS handshake, verified, over loopback; both ends' CPU counts. The
// chart's certificate is RSA-2048 (Helm's genCA), cert-manager's often
// ECDSA P-256.
func BenchmarkHandshake(b *testing.B) {
	for _, kind := range []string{"ecdsa-p256", "rsa-2048"} {
		b.Run(kind, func(b *testing.B) {
			dir := b.TempDir()
			f := tlsfilestest.Write(b, dir, "prober-matrix.prober.svc")
			if kind == "rsa-2048" {
				f = writeRSA(b, dir, f)
			}
			srv, err := NewServer(f.Cert, f.Key, nil)
			if err != nil {
				b.Fatal(err)
			}
			roots, err := NewRoots(f.CA, nil)
			if err != nil {
				b.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			scfg := srv.Config()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						defer c.Close()
						s := tls.Server(c, scfg)
						_ = s.SetDeadline(time.Now().Add(10 * time.Second))
						_ = s.Handshake()
					}()
				}
			}()
			ccfg := roots.Config("prober-matrix.prober.svc")
			b.ResetTimer()
			for range b.N {
				c, err := tls.Dial("tcp", ln.Addr().String(), ccfg)
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}

// writeRSA replaces f's certificate and key with RSA-2048 ones signed by
// a new RSA CA, as Helm's genCA and genSignedCert make them.
func writeRSA(b *testing.B, dir string, f tlsfilestest.Files) tlsfilestest.Files {
	caKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	now := time.Now()
	caT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, _ := x509.CreateCertificate(rand.Reader, caT, caT, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	t := &x509.Certificate{SerialNumber: big.NewInt(2), DNSNames: []string{"prober-matrix.prober.svc"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	der, _ := x509.CreateCertificate(rand.Reader, t, ca, &key.PublicKey, caKey)
	f = tlsfilestest.Files{CA: filepath.Join(dir, "rsa-ca.crt"), Cert: filepath.Join(dir, "rsa.crt"), Key: filepath.Join(dir, "rsa.key")}
	for name, blk := range map[string]*pem.Block{f.CA: {Type: "CERTIFICATE", Bytes: caDER}, f.Cert: {Type: "CERTIFICATE", Bytes: der},
		f.Key: {Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}} {
		if err := os.WriteFile(name, pem.EncodeToMemory(blk), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	return f
}
