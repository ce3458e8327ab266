package agent

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netprober/prober/api"
)

// pullKey is the key the matrix proves it holds when it pulls the
// observations or asks for a trace (docs/security.md). An agent following
// the matrix's plan learns it from the answers to its authenticated
// long-poll and serves its observations to that key alone; until the
// first answer, to no one.
type pullKey struct {
	required atomic.Bool
	key      atomic.Pointer[string]
	// now is the clock signed requests are judged by; nil: time.Now.
	now func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // signed requests' MACs, until they expire
}

func (k *pullKey) set(key string) {
	if key != "" {
		k.key.Store(&key)
	}
}

// maxSeen bounds the replay check: the matrix's replicas sign a pull
// every round and a trace now and then, a few hundred in PullWindow.
const maxSeen = 4096

// fresh reports whether mac has not been seen in its window, and
// remembers it.
func (k *pullKey) fresh(mac string, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, dup := k.seen[mac]; dup {
		return false
	}
	if k.seen == nil {
		k.seen = map[string]time.Time{}
	}
	if len(k.seen) >= maxSeen {
		for m, until := range k.seen {
			if now.After(until) {
				delete(k.seen, m)
			}
		}
		if len(k.seen) >= maxSeen {
			return false // only the key's holder signs; it never sends this many
		}
	}
	k.seen[mac] = now.Add(2 * api.PullWindow)
	return true
}

// authorized: a request signed with the key (api.SignPull), once, or, from
// a matrix that predates signing, the key itself.
func (k *pullKey) authorized(r *http.Request, want string) bool {
	auth := r.Header.Get("Authorization")
	if strings.HasPrefix(auth, api.PullAuthScheme+" ") {
		now := time.Now()
		if k.now != nil {
			now = k.now()
		}
		mac, ok := api.VerifyPull(want, auth, r.Method, r.URL.RequestURI(), now)
		return ok && k.fresh(mac, now)
	}
	got, _ := strings.CutPrefix(auth, "Bearer ")
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// guard refuses next to a request without the key, when one is required.
func (k *pullKey) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !k.required.Load() {
			next.ServeHTTP(w, r)
			return
		}
		want := k.key.Load()
		if want == nil || !k.authorized(r, *want) {
			w.Header().Set("WWW-Authenticate", api.PullAuthScheme+` realm="prober-agent"`)
			http.Error(w, "the observations are the matrix's: read them on the matrix's page or /api/v1/matrix", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
