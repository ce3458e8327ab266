package hub

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
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
// cached one is of another generation or older than maxAge.
func (e *encoded) get(gen uint64, maxAge time.Duration, enc func(*bytes.Buffer) error) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.at.IsZero() || e.gen != gen || time.Since(e.at) > maxAge {
		var buf bytes.Buffer
		e.err = enc(&buf)
		e.body, e.gen, e.at, e.gz = buf.Bytes(), gen, time.Now(), nil
	}
	return e.body, e.err
}

// getGzip is get's body gzipped, compressed once per body: the matrix of
// 5,000 nodes is 3.7 MB of JSON, a page's refresh through a port-forward.
func (e *encoded) getGzip(gen uint64, maxAge time.Duration, enc func(*bytes.Buffer) error) ([]byte, error) {
	body, err := e.get(gen, maxAge, enc)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gz == nil && len(e.body) > 0 && len(body) > 0 && &e.body[0] == &body[0] {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(body)
		zw.Close()
		e.gz = buf.Bytes()
	}
	if e.gz == nil {
		return body, errNotGzipped // re-encoded meanwhile: this request takes it plain
	}
	return e.gz, nil
}

var errNotGzipped = errors.New("not gzipped")

// serveCached writes e's body for this generation, gzipped when the
// client accepts it (and did not ask for ?pretty).
func (h *Hub) serveCached(w http.ResponseWriter, r *http.Request, e *encoded, maxAge time.Duration, enc func(*bytes.Buffer) error) {
	gen := h.gen.Load()
	w.Header().Add("Vary", "Accept-Encoding")
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") && !r.URL.Query().Has("pretty") {
		body, err := e.getGzip(gen, maxAge, enc)
		if err == nil {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(body)
			return
		}
		if !errors.Is(err, errNotGzipped) {
			h.writeBody(w, r, nil, err)
			return
		}
		h.writeBody(w, r, body, nil)
		return
	}
	body, err := e.get(gen, maxAge, enc)
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
