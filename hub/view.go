package hub

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
)

// maxDeviceName bounds the device a client asks about.
const maxDeviceName = 512

// Fabric returns the topology of the latest round.
func (h *Hub) Fabric() matrix.Fabric {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fabric
}

// History returns the suspects of the last hour.
func (h *Hub) History() History {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hist.view(h.now())
}

// crossings caches api.FabricCellsPath's answers of one generation: a spine's
// cells at 5,000 nodes take 0.2 s under the hub's lock
// (BenchmarkCrossing5000), and the page asks again on every hover. Only
// names of the generation's fabric are computed, and at most
// maxCrossings of them: a client asking for a new device each time
// (1,713 a second measured) held the hub's lock from the rounds and
// every other view.
type crossings struct {
	once  chan struct{} // one computation at a time
	mu    sync.Mutex
	gen   uint64
	body  map[string][]byte
	known map[string]bool // the generation's devices and links
}

// maxCrossings bounds the devices computed, and cached, per generation.
const maxCrossings = 64

// lookup is dev's cached answer in gen, whether dev is of gen's fabric
// (names gives the fabric's names on a generation's first request), and
// whether the generation's budget is spent.
func (c *crossings) lookup(gen uint64, dev string, names func() map[string]bool) (body []byte, known, spent bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.known == nil {
		c.gen, c.body, c.known = gen, map[string][]byte{}, names()
	}
	return c.body[dev], c.known[dev], len(c.body) >= maxCrossings
}

func (c *crossings) keep(gen uint64, dev string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen && len(c.body) < maxCrossings {
		c.body[dev] = body
	}
}

func (h *Hub) serveCrossing(w http.ResponseWriter, r *http.Request) {
	dev := strings.TrimSpace(r.URL.Query().Get("device"))
	if dev == "" || len(dev) > maxDeviceName {
		http.Error(w, "device: give the name of one device, host or link (from->to) of the fabric", http.StatusBadRequest)
		return
	}
	gen := h.gen.Load()
	// The names are read under the hub's lock: a round rewrites the
	// fabric in place.
	names := func() map[string]bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		known := make(map[string]bool, len(h.fabric.Devices)+len(h.fabric.Links))
		for _, d := range h.fabric.Devices {
			known[d.Name] = true
		}
		for _, l := range h.fabric.Links {
			known[l.From+"->"+l.To] = true
		}
		return known
	}
	body, known, spent := h.cross.lookup(gen, dev, names)
	switch {
	case body != nil:
	case !known:
		http.Error(w, "device "+strconv.Quote(dev)+": no device, host or link (from->to) of this round's fabric ("+api.FabricPath+")", http.StatusNotFound)
		return
	case spent:
		retryAfter(w, h.cfg.Interval.D())
		http.Error(w, "the fabric's cells of "+strconv.Itoa(maxCrossings)+" devices were computed this round; ask again next round", http.StatusServiceUnavailable)
		return
	default:
		select {
		case h.cross.once <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		if body, _, _ = h.cross.lookup(gen, dev, names); body == nil {
			h.mu.Lock()
			cells := h.m.Crossing(h.now(), dev)
			h.mu.Unlock()
			var buf bytes.Buffer
			if err := encodeJSON(&buf, crossing{Device: dev, Cells: cells}); err != nil {
				<-h.cross.once
				h.writeBody(w, r, nil, err)
				return
			}
			body = buf.Bytes()
			h.cross.keep(gen, dev, body)
		}
		<-h.cross.once
	}
	h.writeBody(w, r, body, nil)
}

// retryAfter sets Retry-After to d, at least a second.
func retryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int((d+time.Second-1)/time.Second))))
}
