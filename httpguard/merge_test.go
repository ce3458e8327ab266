package httpguard

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestMerge: one server over two listeners answers on both, and Close
// closes both.
func TestMerge(t *testing.T) {
	var lns []net.Listener
	for _, addr := range []string{"127.0.0.1:0", "127.0.0.2:0"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("listen %s: %v", addr, err)
		}
		lns = append(lns, ln)
	}
	m := Merge(lns...)
	if m.Addr() != lns[0].Addr() {
		t.Errorf("Addr %v, want the first's %v", m.Addr(), lns[0].Addr())
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(m) }()
	client := &http.Client{Timeout: 5 * time.Second}
	for _, ln := range lns {
		resp, err := client.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatalf("GET on %v: %v", ln.Addr(), err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Errorf("GET on %v: %q", ln.Addr(), b)
		}
	}
	srv.Close()
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve ended with %v, want ErrServerClosed", err)
	}
	for _, ln := range lns {
		if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Errorf("%v still accepts after Close", ln.Addr())
		}
	}
}
