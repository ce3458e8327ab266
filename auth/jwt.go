package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"
)

// Claims are what the matrix reads from a Kubernetes ServiceAccount
// token: who the pod is, whom the token is for, when it is valid.
type Claims struct {
	Issuer    string
	Audience  []string
	Expiry    time.Time
	NotBefore time.Time
	Namespace string
	// ServiceAccount, Pod and Node name the token's subject; Node is
	// empty on API servers before 1.30.
	ServiceAccount, Pod, PodUID, Node string
}

// Keys are an issuer's public signing keys by key id.
type Keys struct {
	Issuer string
	keys   map[string]crypto.PublicKey
}

// maxToken bounds a token's length: Kubernetes' are about 1 KiB.
const maxToken = 16 << 10

// ParseKeys reads a JWKS document (the API server's /openid/v1/jwks) for
// issuer. Keys of an unknown type or curve are skipped; none usable is an
// error.
func ParseKeys(issuer string, jwks []byte) (*Keys, error) {
	var doc struct {
		Keys []struct {
			Kty, Kid, Alg, Use, Crv string
			N, E, X, Y              string
		} `json:"keys"`
	}
	if err := json.Unmarshal(jwks, &doc); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	k := &Keys{Issuer: issuer, keys: map[string]crypto.PublicKey{}}
	for _, j := range doc.Keys {
		if j.Use != "" && j.Use != "sig" {
			continue
		}
		switch j.Kty {
		case "RSA":
			n, err1 := b64int(j.N)
			e, err2 := b64int(j.E)
			if err1 != nil || err2 != nil || !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31 || n.BitLen() < 2048 {
				continue
			}
			k.keys[j.Kid] = &rsa.PublicKey{N: n, E: int(e.Int64())}
		case "EC":
			var c elliptic.Curve
			switch j.Crv {
			case "P-256":
				c = elliptic.P256()
			case "P-384":
				c = elliptic.P384()
			case "P-521":
				c = elliptic.P521()
			default:
				continue
			}
			x, err1 := b64int(j.X)
			y, err2 := b64int(j.Y)
			if err1 != nil || err2 != nil {
				continue
			}
			k.keys[j.Kid] = &ecdsa.PublicKey{Curve: c, X: x, Y: y}
		}
	}
	if len(k.keys) == 0 {
		return nil, errors.New("jwks: no RSA or EC signing key")
	}
	return k, nil
}

// Len is how many keys k holds.
func (k *Keys) Len() int { return len(k.keys) }

// ErrUnknownKey is a token signed by a key k does not hold: the issuer
// may have rotated its keys, and fetching them again may help.
var ErrUnknownKey = errors.New("token signed by an unknown key")

// Verify checks token's signature against k and its issuer, audience and
// validity at now, and returns its claims.
func (k *Keys) Verify(token, audience string, now time.Time) (*Claims, error) {
	if len(token) > maxToken {
		return nil, fmt.Errorf("token of %d bytes, at most %d", len(token), maxToken)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a signed JWT")
	}
	var head struct{ Alg, Kid string }
	if err := b64json(parts[0], &head); err != nil {
		return nil, fmt.Errorf("token header: %w", err)
	}
	key, ok := k.keys[head.Kid]
	if !ok {
		return nil, ErrUnknownKey
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return nil, errors.New("token signature: not base64url")
	}
	if err := verify(key, head.Alg, parts[0]+"."+parts[1], sig); err != nil {
		return nil, err
	}
	var body struct {
		Iss string          `json:"iss"`
		Aud json.RawMessage `json:"aud"`
		Exp int64           `json:"exp"`
		Nbf int64           `json:"nbf"`
		K8s struct {
			Namespace string `json:"namespace"`
			Pod       struct {
				Name, UID string
			} `json:"pod"`
			Node struct {
				Name string
			} `json:"node"`
			ServiceAccount struct {
				Name string
			} `json:"serviceaccount"`
		} `json:"kubernetes.io"`
	}
	if err := b64json(parts[1], &body); err != nil {
		return nil, fmt.Errorf("token claims: %w", err)
	}
	c := &Claims{Issuer: body.Iss, Expiry: time.Unix(body.Exp, 0), Namespace: body.K8s.Namespace,
		ServiceAccount: body.K8s.ServiceAccount.Name, Pod: body.K8s.Pod.Name, PodUID: body.K8s.Pod.UID, Node: body.K8s.Node.Name}
	if body.Nbf != 0 {
		c.NotBefore = time.Unix(body.Nbf, 0)
	}
	// aud is a string or a list of strings.
	var one string
	if json.Unmarshal(body.Aud, &one) == nil {
		c.Audience = []string{one}
	} else if json.Unmarshal(body.Aud, &c.Audience) != nil {
		return nil, errors.New("token audience: neither a string nor a list")
	}
	switch {
	case c.Issuer != k.Issuer:
		return nil, fmt.Errorf("token issued by %.100q, want %q", c.Issuer, k.Issuer)
	case !slices.Contains(c.Audience, audience):
		return nil, fmt.Errorf("token for audience %.100q, want %q", c.Audience, audience)
	case body.Exp == 0 || !now.Before(c.Expiry):
		return nil, errors.New("token expired")
	case now.Before(c.NotBefore.Add(-time.Minute)):
		return nil, errors.New("token not yet valid")
	case c.Pod == "":
		return nil, errors.New("token names no pod: not a projected pod token")
	}
	return c, nil
}

func verify(key crypto.PublicKey, alg, signed string, sig []byte) error {
	bad := errors.New("token signature does not verify")
	switch key := key.(type) {
	case *rsa.PublicKey:
		h, hash := digest(alg, "RS", signed)
		if h == nil {
			return fmt.Errorf("token algorithm %.20q for an RSA key", alg)
		}
		if rsa.VerifyPKCS1v15(key, hash, h, sig) != nil {
			return bad
		}
	case *ecdsa.PublicKey:
		h, _ := digest(alg, "ES", signed)
		size := (key.Curve.Params().BitSize + 7) / 8
		if h == nil || len(sig) != 2*size {
			return fmt.Errorf("token algorithm %.20q or signature length %d for an EC key", alg, len(sig))
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		if !ecdsa.Verify(key, h, r, s) {
			return bad
		}
	}
	return nil
}

// digest hashes signed for alg (family RS or ES, 256/384/512).
func digest(alg, family, signed string) ([]byte, crypto.Hash) {
	if !strings.HasPrefix(alg, family) {
		return nil, 0
	}
	switch alg[2:] {
	case "256":
		h := sha256.Sum256([]byte(signed))
		return h[:], crypto.SHA256
	case "384":
		h := sha512.Sum384([]byte(signed))
		return h[:], crypto.SHA384
	case "512":
		h := sha512.Sum512([]byte(signed))
		return h[:], crypto.SHA512
	}
	return nil, 0
}

// b64 is JWT's base64url, strict: the unused low bits of a last
// character must be zero, so a token has one spelling. Lenient, an RSA
// signature had 16, each a new token to cache.
var b64 = base64.RawURLEncoding.Strict()

func b64int(s string) (*big.Int, error) {
	b, err := b64.DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, errors.New("not base64url")
	}
	return new(big.Int).SetBytes(b), nil
}

func b64json(s string, v any) error {
	b, err := b64.DecodeString(s)
	if err != nil {
		return errors.New("not base64url")
	}
	return json.Unmarshal(b, v)
}
