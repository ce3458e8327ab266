package hub

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"strings"
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
	gz   []byte // body gzipped, made on the first request that accepts it
}

// get returns the body for generation gen, encoding it with enc when the
// cached one is of another generation or older than maxAge; gzipped, and
// compressed once per body, when gz is set: the matrix of 5,000 nodes is
// 3.7 MB of JSON, a page's refresh through a port-forward.
func (e *encoded) get(gen uint64, maxAge time.Duration, enc func(*bytes.Buffer) error, gz bool) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.at.IsZero() || e.gen != gen || time.Since(e.at) > maxAge {
		var buf bytes.Buffer
		e.err = enc(&buf)
		e.body, e.gen, e.at, e.gz = buf.Bytes(), gen, time.Now(), nil
	}
	if !gz || e.err != nil {
		return e.body, e.err
	}
	if e.gz == nil {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(e.body)
		zw.Close()
		e.gz = buf.Bytes()
	}
	return e.gz, nil
}

// serveCached writes e's body for this generation, gzipped when the
// client accepts it (and did not ask for ?pretty).
func (h *Hub) serveCached(w http.ResponseWriter, r *http.Request, e *encoded, maxAge time.Duration, enc func(*bytes.Buffer) error) {
	w.Header().Add("Vary", "Accept-Encoding")
	gz := strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") && !r.URL.Query().Has("pretty")
	body, err := e.get(h.gen.Load(), maxAge, enc, gz)
	if gz && err == nil {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(body)
		return
	}
	h.writeBody(w, r, body, err)
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
