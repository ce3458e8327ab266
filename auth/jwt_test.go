package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

const issuer = "https://kubernetes.default.svc"

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type signer struct {
	kid string
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func (s signer) jwk() map[string]string {
	if s.rsa != nil {
		return map[string]string{"kty": "RSA", "kid": s.kid, "alg": "RS256", "use": "sig",
			"n": b64(s.rsa.N.Bytes()), "e": b64(big.NewInt(int64(s.rsa.E)).Bytes())}
	}
	return map[string]string{"kty": "EC", "kid": s.kid, "crv": "P-256", "use": "sig",
		"x": b64(s.ec.X.FillBytes(make([]byte, 32))), "y": b64(s.ec.Y.FillBytes(make([]byte, 32)))}
}

// token signs claims as a kubelet-projected ServiceAccount token.
func (s signer) token(t *testing.T, alg string, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": alg, "kid": s.kid})
	c, _ := json.Marshal(claims)
	signed := b64(h) + "." + b64(c)
	d := sha256.Sum256([]byte(signed))
	var sig []byte
	var err error
	if s.rsa != nil {
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.rsa, crypto.SHA256, d[:])
	} else {
		var r, ss *big.Int
		r, ss, err = ecdsa.Sign(rand.Reader, s.ec, d[:])
		sig = append(r.FillBytes(make([]byte, 32)), ss.FillBytes(make([]byte, 32))...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + b64(sig)
}

func claims(edit func(map[string]any)) map[string]any {
	c := map[string]any{
		"iss": issuer, "aud": []string{"prober"}, "exp": now.Add(time.Hour).Unix(), "nbf": now.Add(-time.Minute).Unix(),
		"sub": "system:serviceaccount:prober:prober-agent",
		"kubernetes.io": map[string]any{
			"namespace":      "prober",
			"pod":            map[string]string{"name": "prober-pod-abc", "uid": "u1"},
			"node":           map[string]string{"name": "n11", "uid": "u2"},
			"serviceaccount": map[string]string{"name": "prober-agent", "uid": "u3"},
		},
	}
	if edit != nil {
		edit(c)
	}
	return c
}

func TestVerify(t *testing.T) {
	t.Parallel()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	r, e := signer{kid: "r1", rsa: rk}, signer{kid: "e1", ec: ek}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	jwks, _ := json.Marshal(map[string]any{"keys": []any{r.jwk(), e.jwk(), map[string]string{"kty": "OKP", "kid": "x"}}})
	keys, err := ParseKeys(issuer, jwks)
	if err != nil {
		t.Fatal(err)
	}
	if keys.Len() != 2 {
		t.Errorf("%d keys, want the RSA and the EC one", keys.Len())
	}
	for _, s := range []signer{r, e} {
		alg := "RS256"
		if s.ec != nil {
			alg = "ES256"
		}
		c, err := keys.Verify(s.token(t, alg, claims(nil)), "prober", now)
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if c.Pod != "prober-pod-abc" || c.PodUID != "u1" || c.Node != "n11" || c.Namespace != "prober" || c.ServiceAccount != "prober-agent" {
			t.Errorf("%s: claims %+v", alg, c)
		}
	}
	good := r.token(t, "RS256", claims(nil))
	parts := strings.Split(good, ".")
	forged, _ := json.Marshal(claims(func(c map[string]any) {
		c["kubernetes.io"].(map[string]any)["pod"] = map[string]string{"name": "prober-pod-other"}
	}))
	for _, tc := range []struct {
		name, token, audience, want string
	}{
		{"another audience", good, "kubernetes", "audience"},
		{"a string audience", r.token(t, "RS256", claims(func(c map[string]any) { c["aud"] = "other" })), "prober", "audience"},
		{"expired", r.token(t, "RS256", claims(func(c map[string]any) { c["exp"] = now.Add(-time.Second).Unix() })), "prober", "expired"},
		{"no expiry", r.token(t, "RS256", claims(func(c map[string]any) { delete(c, "exp") })), "prober", "expired"},
		{"not yet valid", r.token(t, "RS256", claims(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })), "prober", "not yet"},
		{"another issuer", r.token(t, "RS256", claims(func(c map[string]any) { c["iss"] = "https://evil" })), "prober", "issued by"},
		{"no pod", r.token(t, "RS256", claims(func(c map[string]any) { delete(c, "kubernetes.io") })), "prober", "no pod"},
		{"claims swapped", parts[0] + "." + b64(forged) + "." + parts[2], "prober", "does not verify"},
		{"signed by another key", signer{kid: "r1", rsa: other}.token(t, "RS256", claims(nil)), "prober", "does not verify"},
		{"an unknown key id", signer{kid: "r9", rsa: other}.token(t, "RS256", claims(nil)), "prober", "unknown key"},
		{"alg none", b64([]byte(`{"alg":"none","kid":"r1"}`)) + "." + parts[1] + ".", "prober", "algorithm"},
		{"no signature", parts[0] + "." + parts[1] + ".", "prober", "does not verify"},
		{"an EC algorithm on an RSA key", r.token(t, "ES256", claims(nil)), "prober", "algorithm"},
		{"two parts", parts[0] + "." + parts[1], "prober", "not a signed JWT"},
		{"garbage", "a.b.c", "prober", "header"},
		{"too long", strings.Repeat("a", maxToken+1), "prober", "at most"},
	} {
		_, err := keys.Verify(tc.token, tc.audience, now)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if _, err := keys.Verify(signer{kid: "r9", rsa: other}.token(t, "RS256", claims(nil)), "prober", now); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("unknown key: %v, want ErrUnknownKey (the caller refetches on it)", err)
	}
	if _, err := ParseKeys(issuer, []byte(`{"keys":[{"kty":"RSA","kid":"k","n":"AQAB","e":"AQAB"}]}`)); err == nil {
		t.Error("a 17-bit RSA key was accepted")
	}
}

func FuzzVerify(f *testing.F) {
	f.Add("eyJhbGciOiJSUzI1NiIsImtpZCI6InIxIn0.e30.AAAA")
	f.Add("a.b.c")
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	jwks, _ := json.Marshal(map[string]any{"keys": []any{signer{kid: "r1", rsa: rk}.jwk()}})
	keys, _ := ParseKeys(issuer, jwks)
	f.Fuzz(func(t *testing.T, token string) {
		keys.Verify(token, "prober", now) // must not panic
	})
}
