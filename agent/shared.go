package agent

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
)

// sharedTTL is how long one encoding of /metrics or the observations is
// served to every reader. Each reader used to get its own, held in full
// while it wrote to a client that did not read: stalled observation
// streams took an agent from 47 to 696 MB (issue 15). Shared, slow
// readers pin at most (write timeout / sharedTTL) encodings per variant.
const sharedTTL = time.Second

// sharedResponse serves every request of a variant made within ttl, and
// under the same generation, the one response h made for the first of
// them; requests that come while h runs wait for it, so h runs at most
// once at a time.
type sharedResponse struct {
	h   http.Handler
	ttl time.Duration
	// variant names the response a request wants, from a small set: the
	// cache keeps one per variant.
	variant func(*http.Request) string
	// canon, if set, is the request h serves for r's variant.
	canon func(*http.Request) *http.Request
	gen   func() uint64 // a change (targets, labels) ends every entry

	mu      sync.Mutex
	entries map[string]*sharedEntry
}

type sharedEntry struct {
	at     time.Time
	gen    uint64
	status int
	header http.Header
	body   []byte
}

func (s *sharedResponse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e := s.get(s.variant(r), r)
	for k, v := range e.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(e.body)))
	w.WriteHeader(e.status)
	w.Write(e.body) // an error is the client's: it went, or the write timed out
}

func (s *sharedResponse) get(key string, r *http.Request) *sharedEntry {
	now := time.Now()
	gen := s.gen()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[key]; e != nil && e.gen == gen && now.Sub(e.at) < s.ttl {
		return e
	}
	if s.canon != nil {
		r = s.canon(r)
	}
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	s.h.ServeHTTP(rec, r)
	e := &sharedEntry{at: now, gen: gen, status: rec.status, header: rec.header, body: rec.body.Bytes()}
	if s.entries == nil {
		s.entries = map[string]*sharedEntry{}
	}
	s.entries[key] = e
	return e
}

// recorder is the ResponseWriter a shared response is made with.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}

// metricsVariant names a scrape by the exposition format it negotiates
// and whether it takes gzip, the only choices promhttp makes from a
// request, so any Accept header maps to one of a few entries.
func metricsVariant(r *http.Request) string {
	return string(expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)) + " " + metricsEncoding(r)
}

// metricsCanon keeps of a scrape only what metricsVariant looked at, so
// that promhttp makes the variant's response.
func metricsCanon(r *http.Request) *http.Request {
	req := r.Clone(r.Context())
	req.Header = http.Header{"Accept": r.Header.Values("Accept"), "Accept-Encoding": {metricsEncoding(r)}}
	return req
}

func metricsEncoding(r *http.Request) string {
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		return "gzip"
	}
	return "identity"
}

func acceptsGzip(h string) bool {
	for part := range strings.SplitSeq(h, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.TrimSpace(name)
		if (name == "gzip" || name == "*") && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// observationsVariant is the observations JSON, compact or ?pretty.
func observationsVariant(r *http.Request) string {
	if r.URL.Query().Has("pretty") {
		return "pretty"
	}
	return "compact"
}
