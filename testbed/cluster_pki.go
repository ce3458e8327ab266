package testbed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// clusterPKI is what the control plane and the nodes authenticate with:
// one CA, the API server's serving and kubelet-client certificates, the
// service-account key pair, and a bearer token per identity (the API
// server's token file: simpler than a client certificate per component,
// and as real for what prober exercises).
type clusterPKI struct {
	dir    string
	caPEM  []byte
	tokens map[string]string // identity -> token
}

// File names in clusterPKI.dir.
const (
	pkiCA            = "ca.crt"
	pkiServingCert   = "apiserver.crt"
	pkiServingKey    = "apiserver.key"
	pkiKubeletCert   = "apiserver-kubelet-client.crt"
	pkiKubeletKey    = "apiserver-kubelet-client.key"
	pkiSAKey         = "sa.key"
	pkiSAPub         = "sa.pub"
	pkiTokens        = "tokens.csv"
	clusterAdminUser = "admin"
)

// writeClusterPKI writes the PKI into dir. servingIPs and the
// kubernetes.default.svc names go in the API server's certificate: its own
// address, the VIP kubelets dial, the kubernetes Service's ClusterIP.
// identities maps a user name to its groups, one token each.
func writeClusterPKI(dir string, servingIPs []netip.Addr, identities map[string][]string) (*clusterPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "prober testbed cluster CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p := &clusterPKI{dir: dir, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tokens: map[string]string{}}
	if err := os.WriteFile(filepath.Join(dir, pkiCA), p.caPEM, 0o644); err != nil {
		return nil, err
	}
	var ips []net.IP
	for _, a := range append(servingIPs, netip.MustParseAddr("127.0.0.1")) {
		ips = append(ips, a.AsSlice())
	}
	leaves := []struct {
		cert, key string
		tmpl      x509.Certificate
	}{
		{pkiServingCert, pkiServingKey, x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-apiserver"},
			IPAddresses: ips,
			DNSNames:    []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}},
		// The API server's identity towards kubelets (logs, exec).
		{pkiKubeletCert, pkiKubeletKey, x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
	}
	for i, l := range leaves {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		t := l.tmpl
		t.SerialNumber = big.NewInt(int64(i + 2))
		t.NotBefore, t.NotAfter = caTmpl.NotBefore, caTmpl.NotAfter
		t.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, &t, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, l.cert), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
			return nil, err
		}
		if err := writeECKey(filepath.Join(dir, l.key), key); err != nil {
			return nil, err
		}
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := writeECKey(filepath.Join(dir, pkiSAKey), sa); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, pkiSAPub), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return nil, err
	}
	var csv strings.Builder
	for _, user := range slices.Sorted(maps.Keys(identities)) {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		tok := hex.EncodeToString(b)
		p.tokens[user] = tok
		// token,user,uid,"group1,group2"
		fmt.Fprintf(&csv, "%s,%s,%s,\"%s\"\n", tok, user, user, strings.Join(identities[user], ","))
	}
	return p, os.WriteFile(filepath.Join(dir, pkiTokens), []byte(csv.String()), 0o600)
}

func (p *clusterPKI) path(name string) string { return filepath.Join(p.dir, name) }

// kubeconfig writes a kubeconfig for user at server into path.
func (p *clusterPKI) kubeconfig(path, server, user string) error {
	tok, ok := p.tokens[user]
	if !ok {
		return fmt.Errorf("kubeconfig: no token for %s", user)
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: testbed
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: testbed
  context: {cluster: testbed, user: %s}
current-context: testbed
`, server, p.path(pkiCA), user, tok, user)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

func writeECKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}
