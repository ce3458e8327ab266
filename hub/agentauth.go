package hub

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/auth"
)

// agentAuth authenticates the agents' long-polls and keys the matrix's
// pulls (docs/security.md). An agent proves its pod with its projected
// ServiceAccount token, verified here against the API server's signing
// keys, not by a TokenReview per request (seed 003). The answers to an
// authenticated long-poll carry the key the matrix presents when it pulls
// that agent, and the agent serves its observations to that key alone.
type agentAuth struct {
	// keys fetches the API server's signing keys; nil when agents'
	// tokens are not checked (agentAuth: none).
	keys          func(context.Context) (*auth.Keys, error)
	namespace, sa string
	secret        []byte
	fetching      sync.Mutex
	mu            sync.Mutex
	current       *auth.Keys
	fetched       time.Time
	fetchErr      error
	verified      map[string]*auth.Claims // by token, until it expires
}

// refetchEvery bounds how often a token naming an unknown key fetches the
// API server's keys again.
const refetchEvery = 10 * time.Second

// maxVerified bounds the verified-token cache: two agents a node at
// 10,000 nodes, each token replaced hourly by the kubelet.
const maxVerified = 1 << 16

// newAgentAuth: secret derives the pull keys; nil draws one.
func newAgentAuth(keys func(context.Context) (*auth.Keys, error), namespace, sa string, secret []byte) *agentAuth {
	a := &agentAuth{keys: keys, namespace: namespace, sa: sa, verified: map[string]*auth.Claims{},
		secret: secret}
	if a.secret == nil {
		a.secret = make([]byte, 32)
		rand.Read(a.secret)
	}
	return a
}

// pullKey is the key the matrix presents to agent name: derived, so that
// it needs no state per agent.
func (a *agentAuth) pullKey(name string) string {
	m := hmac.New(sha256.New, a.secret)
	m.Write([]byte(name))
	return hex.EncodeToString(m.Sum(nil))
}

// authError is a refused long-poll: its status and why.
type authError struct {
	status int
	reason string // the metric's label
	err    error
}

func (e *authError) Error() string { return e.err.Error() }

func refuse(status int, reason string, format string, args ...any) *authError {
	return &authError{status: status, reason: reason, err: fmt.Errorf(format, args...)}
}

// token verifies r's bearer token: signed by the API server, for
// prober's audience, of a pod of the agents' ServiceAccount. nil claims
// with nil error: tokens are not checked.
func (a *agentAuth) token(ctx context.Context, r *http.Request, now time.Time) (*auth.Claims, *authError) {
	if a.keys == nil {
		return nil, nil
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return nil, refuse(http.StatusUnauthorized, "no_token", "no bearer token: agents present their projected ServiceAccount token (audience %q)", api.AgentTokenAudience)
	}
	a.mu.Lock()
	c := a.verified[tok]
	a.mu.Unlock()
	if c != nil && now.Before(c.Expiry) {
		return c, nil
	}
	c, err := a.verify(ctx, tok, now)
	if err != nil {
		return nil, refuse(http.StatusUnauthorized, "invalid", "token: %v", err)
	}
	if c.Namespace != a.namespace || c.ServiceAccount != a.sa {
		return nil, refuse(http.StatusForbidden, "serviceaccount", "token of %s/%s, want the agents' ServiceAccount %s/%s", c.Namespace, c.ServiceAccount, a.namespace, a.sa)
	}
	// Only the agents' tokens are cached: any pod's token verifies, and
	// foreign ones would flush the agents' out of the bounded cache.
	a.mu.Lock()
	if len(a.verified) >= maxVerified {
		clear(a.verified)
	}
	a.verified[tok] = c
	a.mu.Unlock()
	return c, nil
}

func (a *agentAuth) verify(ctx context.Context, tok string, now time.Time) (*auth.Claims, error) {
	keys, err := a.signingKeys(ctx, false)
	if err != nil {
		return nil, err
	}
	c, err := keys.Verify(tok, api.AgentTokenAudience, now)
	if errors.Is(err, auth.ErrUnknownKey) {
		// The API server may have rotated its keys.
		if keys, err = a.signingKeys(ctx, true); err != nil {
			return nil, err
		}
		c, err = keys.Verify(tok, api.AgentTokenAudience, now)
	}
	return c, err
}

// signingKeys returns the API server's keys, fetching them the first time
// and, when refresh is asked, again at most every refetchEvery: a flood
// of tokens signed by unknown keys costs the API server one request per
// 10 s. Once keys are held, no check waits for a refetch but the one
// that asked for it: the others verify with the keys held, and a refresh
// asked while one runs gets them too (its token fails as an unknown key;
// the agent asks again).
func (a *agentAuth) signingKeys(ctx context.Context, refresh bool) (*auth.Keys, error) {
	held := func() (*auth.Keys, bool) {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.current, a.current != nil && (!refresh || time.Since(a.fetched) < refetchEvery)
	}
	cur, ok := held()
	if ok {
		return cur, nil
	}
	// fetching serializes fetches without holding mu, which the cached
	// tokens' checks take.
	if cur == nil {
		a.fetching.Lock()
	} else if !a.fetching.TryLock() {
		return cur, nil
	}
	defer a.fetching.Unlock()
	if cur, ok = held(); ok { // fetched while this one waited
		return cur, nil
	}
	a.mu.Lock()
	fetched := a.fetched
	a.mu.Unlock()
	if cur == nil && time.Since(fetched) < time.Second {
		a.mu.Lock()
		defer a.mu.Unlock()
		return nil, a.fetchErr // the last try failed a moment ago
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	k, err := a.keys(fctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fetched = time.Now()
	if err != nil {
		a.fetchErr = fmt.Errorf("the API server's signing keys: %w", err)
		if cur != nil {
			return cur, nil // keep verifying with the keys we have
		}
		return nil, a.fetchErr
	}
	a.current = k
	return k, nil
}

// agentPod is the pod discovery found for an agent.
type agentPod struct{ name, uid string }

// bind checks that the token's pod is the agent's pod discovery found,
// by name and, when discovery knows it, by UID: a pod may fetch its own
// plan and be pulled with its own key only, and a deleted pod's token
// does not serve the pod created under its name after it.
func (a *agentAuth) bind(c *auth.Claims, name, pod, uid string) *authError {
	if c == nil {
		return nil
	}
	if c.Pod != pod {
		return refuse(http.StatusForbidden, "pod", "token of pod %s, but agent %s is pod %s", c.Pod, name, pod)
	}
	if uid != "" && c.PodUID != uid {
		return refuse(http.StatusForbidden, "pod_uid", "token of pod %s with UID %.64q, but the pod %s is now UID %s: a token of a pod deleted since", c.Pod, c.PodUID, pod, uid)
	}
	return nil
}
