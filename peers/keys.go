package peers

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/netprober/prober/auth"
)

// SigningKeys fetches the API server's ServiceAccount token issuer and
// public signing keys (its OpenID discovery document and JWKS, readable
// by every ServiceAccount: the system:service-account-issuer-discovery
// role). Two requests; the matrix calls it at start and when a token names
// a key it does not hold, at most every few seconds.
func SigningKeys(ctx context.Context, client kubernetes.Interface) (*auth.Keys, error) {
	rc := client.Discovery().RESTClient()
	body, err := rc.Get().AbsPath("/.well-known/openid-configuration").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("service account issuer discovery: %w", err)
	}
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Issuer == "" {
		return nil, fmt.Errorf("service account issuer discovery: no issuer in %.200q", body)
	}
	// The API server serves its keys here whatever jwks_uri says (that
	// may be an external URL the matrix cannot reach).
	jwks, err := rc.Get().AbsPath("/openid/v1/jwks").SetHeader("Accept", "application/jwk-set+json, application/json").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("service account signing keys: %w", err)
	}
	return auth.ParseKeys(doc.Issuer, jwks)
}

// SigningKeys fetches the API server's signing keys with d's client.
func (d *Discovery) SigningKeys(ctx context.Context) (*auth.Keys, error) {
	return SigningKeys(ctx, d.client)
}
