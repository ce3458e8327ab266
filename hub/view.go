package hub

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/netprober/prober/matrix"
)

// The page's views beyond the matrix and the diagnosis.
const (
	// FabricPath is the topology the matrix traced (matrix.Fabric).
	FabricPath = "/api/v1/fabric"
	// FabricCellsPath?device=NAME lists the cells whose flows cross a
	// device or a link "from->to".
	FabricCellsPath = "/api/v1/fabric/cells"
	// HistoryPath is every suspect of the last hour, with its scores.
	HistoryPath = "/api/v1/history"
	// TracePath?source=&target=&path=&family= traces a cell's pair now
	// (trace.go).
	TracePath = "/api/v1/trace"
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

// crossing is the answer of FabricCellsPath.
type crossing struct {
	Device string           `json:"device"`
	Cells  []matrix.CellRef `json:"cells"`
}

func (h *Hub) serveCrossing(w http.ResponseWriter, r *http.Request) {
	dev := strings.TrimSpace(r.URL.Query().Get("device"))
	if dev == "" || len(dev) > maxDeviceName {
		http.Error(w, "device: give the name of one device, host or link (from->to) of the fabric", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	cells := h.m.Crossing(h.now(), dev)
	h.mu.Unlock()
	h.writeJSON(w, r, crossing{Device: dev, Cells: cells})
}

// retryAfter sets Retry-After to d, at least a second.
func retryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int((d+time.Second-1)/time.Second))))
}
