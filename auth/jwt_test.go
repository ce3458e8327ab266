package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/auth/authtest"
)

const issuer = authtest.Issuer

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type signer = authtest.Signer

var b64s = authtest.B64

func claims(edit func(map[string]any)) map[string]any {
	return authtest.Claims(now, "prober", "prober", "prober-agent", "prober-pod-abc", "u1", edit)
}

const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

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
	r, e := signer{Kid: "r1", RSA: rk}, signer{Kid: "e1", EC: ek}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	jwks, _ := json.Marshal(map[string]any{"keys": []any{r.JWK(), e.JWK(), map[string]string{"kty": "OKP", "kid": "x"}}})
	keys, err := ParseKeys(issuer, jwks)
	if err != nil {
		t.Fatal(err)
	}
	if keys.Len() != 2 {
		t.Errorf("%d keys, want the RSA and the EC one", keys.Len())
	}
	for _, s := range []signer{r, e} {
		alg := "RS256"
		if s.EC != nil {
			alg = "ES256"
		}
		c, err := keys.Verify(s.Token(t, alg, claims(nil)), "prober", now)
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if c.Pod != "prober-pod-abc" || c.PodUID != "u1" || c.Node != "n11" || c.Namespace != "prober" || c.ServiceAccount != "prober-agent" {
			t.Errorf("%s: claims %+v", alg, c)
		}
	}
	good := r.Token(t, "RS256", claims(nil))
	parts := strings.Split(good, ".")
	forged, _ := json.Marshal(claims(func(c map[string]any) {
		c["kubernetes.io"].(map[string]any)["pod"] = map[string]string{"name": "prober-pod-other"}
	}))
	for _, tc := range []struct {
		name, token, audience, want string
	}{
		{"another audience", good, "kubernetes", "audience"},
		{"a string audience", r.Token(t, "RS256", claims(func(c map[string]any) { c["aud"] = "other" })), "prober", "audience"},
		{"expired", r.Token(t, "RS256", claims(func(c map[string]any) { c["exp"] = now.Add(-time.Second).Unix() })), "prober", "expired"},
		{"no expiry", r.Token(t, "RS256", claims(func(c map[string]any) { delete(c, "exp") })), "prober", "expired"},
		{"not yet valid", r.Token(t, "RS256", claims(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })), "prober", "not yet"},
		{"another issuer", r.Token(t, "RS256", claims(func(c map[string]any) { c["iss"] = "https://evil" })), "prober", "issued by"},
		{"no pod", r.Token(t, "RS256", claims(func(c map[string]any) { delete(c, "kubernetes.io") })), "prober", "no pod"},
		{"claims swapped", parts[0] + "." + b64s(forged) + "." + parts[2], "prober", "does not verify"},
		{"signed by another key", signer{Kid: "r1", RSA: other}.Token(t, "RS256", claims(nil)), "prober", "does not verify"},
		{"an unknown key id", signer{Kid: "r9", RSA: other}.Token(t, "RS256", claims(nil)), "prober", "unknown key"},
		{"alg none", b64s([]byte(`{"alg":"none","kid":"r1"}`)) + "." + parts[1] + ".", "prober", "algorithm"},
		{"no signature", parts[0] + "." + parts[1] + ".", "prober", "does not verify"},
		{"an EC algorithm on an RSA key", r.Token(t, "ES256", claims(nil)), "prober", "algorithm"},
		{"two parts", parts[0] + "." + parts[1], "prober", "not a signed JWT"},
		{"garbage", "a.b.c", "prober", "header"},
		{"too long", strings.Repeat("a", maxToken+1), "prober", "at most"},
	} {
		_, err := keys.Verify(tc.token, tc.audience, now)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	// Another spelling of the same signature: the last character's
	// unused low bits set. Lenient base64 reads the same bytes.
	last := strings.IndexByte(base64URL, good[len(good)-1])
	respelled := good[:len(good)-1] + string(base64URL[last|3])
	a, _ := base64.RawURLEncoding.DecodeString(parts[2])
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(respelled, ".")[2])
	if respelled == good || err != nil || string(a) != string(b) {
		t.Fatalf("the respelled token %q is not the same signature (the test's premise)", respelled[len(respelled)-4:])
	}
	if _, err := keys.Verify(respelled, "prober", now); err == nil || !strings.Contains(err.Error(), "base64url") {
		t.Errorf("a token's signature spelled with its spare bits set: %v, want refused as not base64url", err)
	}
	if _, err := keys.Verify(signer{Kid: "r9", RSA: other}.Token(t, "RS256", claims(nil)), "prober", now); !errors.Is(err, ErrUnknownKey) {
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
	jwks := authtest.JWKS(signer{Kid: "r1", RSA: rk})
	keys, _ := ParseKeys(issuer, jwks)
	f.Fuzz(func(t *testing.T, token string) {
		keys.Verify(token, "prober", now) // must not panic
	})
}
