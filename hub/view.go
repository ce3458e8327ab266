package hub

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

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
// (BenchmarkCrossing5000), and the page asks again on every hover.
type crossings struct {
	once chan struct{} // one computation at a time
	mu   sync.Mutex
	gen  uint64
	body map[string][]byte
}

// maxCrossings bounds the devices cached per generation.
const maxCrossings = 64

func (c *crossings) cached(gen uint64, dev string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return nil
	}
	return c.body[dev]
}

func (c *crossings) keep(gen uint64, dev string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.body == nil || len(c.body) >= maxCrossings {
		c.gen, c.body = gen, map[string][]byte{}
	}
	c.body[dev] = body
}

func (h *Hub) serveCrossing(w http.ResponseWriter, r *http.Request) {
	dev := strings.TrimSpace(r.URL.Query().Get("device"))
	if dev == "" || len(dev) > maxDeviceName {
		http.Error(w, "device: give the name of one device, host or link (from->to) of the fabric", http.StatusBadRequest)
		return
	}
	gen := h.gen.Load()
	body := h.cross.cached(gen, dev)
	if body == nil {
		select {
		case h.cross.once <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		if body = h.cross.cached(gen, dev); body == nil {
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
