package hub

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// encoded caches one endpoint's response body: every client asking in the
// same generation (a round, an agent list) within maxAge gets the same
// bytes, encoded once. Forty slow readers then hold one copy of the
// matrix, not forty, and a burst of requests costs one encoding.
type encoded struct {
	mu   sync.Mutex
	gen  uint64
	at   time.Time
	body []byte
	err  error
}

// get returns the body for generation gen, encoding it with enc when the
// cached one is of another generation or older than maxAge.
func (e *encoded) get(gen uint64, maxAge time.Duration, enc func(*bytes.Buffer) error) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.at.IsZero() || e.gen != gen || time.Since(e.at) > maxAge {
		var buf bytes.Buffer
		e.err = enc(&buf)
		e.body, e.gen, e.at = buf.Bytes(), gen, time.Now()
	}
	return e.body, e.err
}

// encodeJSON appends v to b as one JSON document.
func encodeJSON(b *bytes.Buffer, v any) error { return json.NewEncoder(b).Encode(v) }

// writeBody writes a cached JSON body, indented when ?pretty is asked for.
// An encoding error is a 500 and logged: an empty 200 blanked the page.
func (h *Hub) writeBody(w http.ResponseWriter, r *http.Request, body []byte, err error) {
	if err != nil {
		h.log.Error("encode response", "path", r.URL.Path, "err", err)
		http.Error(w, "encoding the response failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Has("pretty") {
		var out bytes.Buffer
		if json.Indent(&out, body, "", "  ") == nil {
			body = out.Bytes()
		}
	}
	w.Write(body)
}

// writeJSON encodes v for one request (views that depend on the query).
func (h *Hub) writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	var buf bytes.Buffer
	err := encodeJSON(&buf, v)
	h.writeBody(w, r, buf.Bytes(), err)
}
