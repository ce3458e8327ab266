package agent

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"sync/atomic"
)

// pullKey is the key the matrix presents when it pulls the observations
// (docs/security.md). An agent following the matrix's plan learns it from
// the answers to its authenticated long-poll and serves its observations
// to that key alone; until the first answer, to no one.
type pullKey struct {
	required atomic.Bool
	key      atomic.Pointer[string]
}

func (k *pullKey) set(key string) {
	if key != "" {
		k.key.Store(&key)
	}
}

// guard refuses next to a request without the key, when one is required.
func (k *pullKey) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !k.required.Load() {
			next.ServeHTTP(w, r)
			return
		}
		want := k.key.Load()
		got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if want == nil || subtle.ConstantTimeCompare([]byte(got), []byte(*want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="prober-agent"`)
			http.Error(w, "the observations are the matrix's: read them on the matrix's page or /api/v1/matrix", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
