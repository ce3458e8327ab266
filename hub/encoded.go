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
	// pretty is body indented, made on the first request for ?pretty:
	// an indented copy per request cost 457 MiB for 64 slow readers.
	pretty []byte
}

// form is the form of a cached body a request gets.
type form int

const (
	plain    form = iota
	gzipped       // Content-Encoding: gzip
	indented      // ?pretty
)

// get returns the body for generation gen, encoding it with enc when the
// cached one is of another generation or older than maxAge, in form f:
// each form made once per body (the matrix of 5,000 nodes is 3.7 MB of
// JSON, a page's refresh through a port-forward: gzipped for it).
func (e *encoded) get(gen uint64, maxAge time.Duration, enc func(*bytes.Buffer) error, f form) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.at.IsZero() || e.gen != gen || time.Since(e.at) > maxAge {
		var buf bytes.Buffer
		e.err = enc(&buf)
		e.body, e.gen, e.at, e.gz, e.pretty = buf.Bytes(), gen, time.Now(), nil, nil
	}
	if e.err != nil {
		return e.body, e.err
	}
	switch f {
	case gzipped:
		if e.gz == nil {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
			zw.Write(e.body)
			zw.Close()
			e.gz = buf.Bytes()
		}
		return e.gz, nil
	case indented:
		if e.pretty == nil {
			var buf bytes.Buffer
			e.pretty = e.body
			if json.Indent(&buf, e.body, "", "  ") == nil {
				e.pretty = buf.Bytes()
			}
		}
		return e.pretty, nil
	}
	return e.body, nil
}

// serveCached writes e's body for this generation: indented for
// ?pretty, else gzipped when the client accepts it; every form shared by
// the round's requests.
func (h *Hub) serveCached(w http.ResponseWriter, r *http.Request, e *encoded, gen uint64, maxAge time.Duration, enc func(*bytes.Buffer) error) {
	w.Header().Add("Vary", "Accept-Encoding")
	f := plain
	switch {
	case r.URL.Query().Has("pretty"):
		f = indented
	case strings.Contains(r.Header.Get("Accept-Encoding"), "gzip"):
		f = gzipped
	}
	body, err := e.get(gen, maxAge, enc, f)
	if err != nil {
		h.writeBody(w, r, body, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if f == gzipped {
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.Write(body)
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
