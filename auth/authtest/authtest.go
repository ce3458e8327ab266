// Package authtest signs Kubernetes-style projected ServiceAccount tokens
// and publishes their keys as a JWKS, for tests of what verifies them.
package authtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"testing"
	"time"
)

// Issuer is the API server's issuer the tokens name.
const Issuer = "https://kubernetes.default.svc"

// Signer signs with an RSA or an EC P-256 key under Kid.
type Signer struct {
	Kid string
	RSA *rsa.PrivateKey
	EC  *ecdsa.PrivateKey
}

// B64 is base64url without padding, as JWTs encode.
func B64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// JWK is the signer's public key as a JWKS entry.
func (s Signer) JWK() map[string]string {
	if s.RSA != nil {
		return map[string]string{"kty": "RSA", "kid": s.Kid, "alg": "RS256", "use": "sig",
			"n": B64(s.RSA.N.Bytes()), "e": B64(big.NewInt(int64(s.RSA.E)).Bytes())}
	}
	return map[string]string{"kty": "EC", "kid": s.Kid, "crv": "P-256", "use": "sig",
		"x": B64(s.EC.X.FillBytes(make([]byte, 32))), "y": B64(s.EC.Y.FillBytes(make([]byte, 32)))}
}

// JWKS is a JWKS document of the signers' keys.
func JWKS(signers ...Signer) []byte {
	var keys []any
	for _, s := range signers {
		keys = append(keys, s.JWK())
	}
	b, _ := json.Marshal(map[string]any{"keys": keys})
	return b
}

// Token signs claims with alg (RS256 or ES256) as a kubelet-projected
// ServiceAccount token.
func (s Signer) Token(t testing.TB, alg string, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": alg, "kid": s.Kid})
	c, _ := json.Marshal(claims)
	signed := B64(h) + "." + B64(c)
	d := sha256.Sum256([]byte(signed))
	var sig []byte
	var err error
	if s.RSA != nil {
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.RSA, crypto.SHA256, d[:])
	} else {
		var r, ss *big.Int
		r, ss, err = ecdsa.Sign(rand.Reader, s.EC, d[:])
		sig = append(r.FillBytes(make([]byte, 32)), ss.FillBytes(make([]byte, 32))...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + B64(sig)
}

// Claims are a projected token's claims for pod (uid podUID) of
// namespace/sa, for audience, valid an hour around now; edit, when set,
// changes them.
func Claims(now time.Time, audience, namespace, sa, pod, podUID string, edit func(map[string]any)) map[string]any {
	c := map[string]any{
		"iss": Issuer, "aud": []string{audience}, "exp": now.Add(time.Hour).Unix(), "nbf": now.Add(-time.Minute).Unix(),
		"sub": "system:serviceaccount:" + namespace + ":" + sa,
		"kubernetes.io": map[string]any{
			"namespace":      namespace,
			"pod":            map[string]string{"name": pod, "uid": podUID},
			"node":           map[string]string{"name": "n11", "uid": "u2"},
			"serviceaccount": map[string]string{"name": sa, "uid": "u3"},
		},
	}
	if edit != nil {
		edit(c)
	}
	return c
}
