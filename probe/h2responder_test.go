package probe

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// startResponder serves a responder on 127.0.0.1 until the test ends.
func startResponder(t testing.TB, cfg ResponderConfig, lim responderLimits) (netip.AddrPort, *http.Server) {
	t.Helper()
	return startResponderOn(t, "127.0.0.1:0", cfg, lim)
}

// startResponderOn serves a responder on listen until the test ends.
func startResponderOn(t testing.TB, listen string, cfg ResponderConfig, lim responderLimits) (netip.AddrPort, *http.Server) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	})
	srv, err := newResponder(mux, cfg, lim)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if cfg.TLS != nil {
			srv.ServeTLS(ln, "", "")
		} else {
			srv.Serve(ln)
		}
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return ln.Addr().(*net.TCPAddr).AddrPort(), srv
}

// writeCert writes a fresh self-signed pair for hosts and returns the
// file names.
func writeCert(t testing.TB, hosts ...string) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM, err := SelfSignedCert(hosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestResponderHTTP1AndH2C(t *testing.T) {
	t.Parallel()
	addr, _ := startResponder(t, ResponderConfig{}, defaultResponderLimits)
	url := "http://" + addr.String() + "/healthz"
	for _, tc := range []struct {
		name  string
		proto func(*http.Protocols)
		want  string
	}{
		{"http1", func(p *http.Protocols) { p.SetHTTP1(true) }, "HTTP/1.1"},
		{"h2c prior knowledge", func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) }, "HTTP/2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &http.Transport{Protocols: new(http.Protocols)}
			tc.proto(tr.Protocols)
			defer tr.CloseIdleConnections()
			if got := get(t, &http.Client{Transport: tr, Timeout: 5 * time.Second}, url); got != tc.want {
				t.Errorf("served over %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResponderTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile := writeCert(t, "127.0.0.1")
	addr, _ := startResponder(t, ResponderConfig{TLS: &ResponderTLS{CertFile: certFile, KeyFile: keyFile}}, defaultResponderLimits)
	pool, err := loadCAFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		forceH bool
		want   string
	}{
		{"alpn h2", true, "HTTP/2.0"},
		{"alpn http/1.1", false, "HTTP/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: tc.forceH}
			defer tr.CloseIdleConnections()
			if got := get(t, &http.Client{Transport: tr, Timeout: 5 * time.Second}, "https://"+addr.String()+"/healthz"); got != tc.want {
				t.Errorf("served over %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewResponderBadTLS(t *testing.T) {
	t.Parallel()
	certFile, _ := writeCert(t, "127.0.0.1")
	for _, tc := range []struct {
		name string
		tls  ResponderTLS
		want string
	}{
		{"cert without key", ResponderTLS{CertFile: certFile}, "certFile and keyFile go together"},
		{"missing files", ResponderTLS{CertFile: "/nonexistent/c.pem", KeyFile: "/nonexistent/k.pem"}, "/nonexistent/c.pem"},
		{"key is not a key", ResponderTLS{CertFile: certFile, KeyFile: certFile}, certFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewResponder(http.NotFoundHandler(), ResponderConfig{TLS: &tc.tls})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSelfSignedCertVerifies(t *testing.T) {
	t.Parallel()
	srv, err := NewResponder(http.NotFoundHandler(), ResponderConfig{Listen: "198.51.100.7:8080", TLS: &ResponderTLS{Hosts: []string{"node-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(srv.TLSConfig.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	for _, name := range []string{"198.51.100.7", "node-1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("generated certificate does not verify for %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "198.51.100.8", Roots: roots}); err == nil {
		t.Error("generated certificate verifies for an address it does not name")
	}
}

// rawH2C is a bare HTTP/2 client over one h2c connection, to see every
// frame the server sends.
type rawH2C struct {
	conn    net.Conn
	wmu     sync.Mutex
	fr      *http2.Framer
	acks    chan [8]byte
	goaway  chan *http2.GoAwayFrame
	setting chan http2.Setting
	done    chan struct{} // reader ended
}

func dialRawH2C(t *testing.T, addr netip.AddrPort) *rawH2C {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := &rawH2C{conn: c, fr: http2.NewFramer(c, c), acks: make(chan [8]byte, 100),
		goaway: make(chan *http2.GoAwayFrame, 1), setting: make(chan http2.Setting, 20), done: make(chan struct{})}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := r.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go r.read()
	t.Cleanup(func() {
		c.Close()
		<-r.done
	})
	return r
}

func (r *rawH2C) read() {
	defer close(r.done)
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			f.ForeachSetting(func(s http2.Setting) error {
				r.setting <- s
				return nil
			})
			r.wmu.Lock()
			r.fr.WriteSettingsAck()
			r.wmu.Unlock()
		case *http2.PingFrame:
			if f.IsAck() {
				r.acks <- f.Data
			}
		case *http2.GoAwayFrame:
			select {
			case r.goaway <- f:
			default:
			}
		}
	}
}

func (r *rawH2C) ping(data [8]byte) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	return r.fr.WritePing(false, data)
}

// pingEvery sends n PINGs, one per interval, each waiting for its ACK. It
// stops at the first GOAWAY and returns it with the number of ACKs.
func (r *rawH2C) pingEvery(t *testing.T, n int, interval time.Duration) (int, *http2.GoAwayFrame) {
	t.Helper()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range n {
		data := [8]byte{byte(i >> 8), byte(i)}
		if err := r.ping(data); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
		select {
		case got := <-r.acks:
			if got != data {
				t.Fatalf("ping %d: ACK carries %x, want %x", i, got, data)
			}
		case g := <-r.goaway:
			return i, g
		case <-r.done:
			t.Fatalf("ping %d: connection closed without GOAWAY", i)
		case <-time.After(2 * time.Second):
			t.Fatalf("ping %d: no ACK within 2s", i)
		}
		<-tick.C
	}
	select {
	case g := <-r.goaway:
		return n, g
	default:
		return n, nil
	}
}

// TestResponderPingRate holds the server to 10 PINGs/s on one connection
// for 5s without GOAWAY (no too_many_pings / ENHANCE_YOUR_CALM), on a
// connection that carries nothing else, with HTTP/1's idle timeout
// shortened to 1s: it must not apply to HTTP/2.
func TestResponderPingRate(t *testing.T) {
	t.Parallel()
	lim := defaultResponderLimits
	lim.idle = time.Second
	addr, _ := startResponder(t, ResponderConfig{}, lim)
	c := dialRawH2C(t, addr)
	acked, g := c.pingEvery(t, 50, 100*time.Millisecond)
	if g != nil {
		t.Fatalf("GOAWAY %v (%q) after %d PINGs at 10/s", g.ErrCode, g.DebugData(), acked)
	}
	if acked != 50 {
		t.Errorf("%d PINGs ACKed, want 50", acked)
	}
}

// TestResponderIdleIgnoresPings pins the x/net/http2 behaviour that sets
// responderLimits.h2Idle: PINGs do not count as activity, so a PING-only
// connection is sent GOAWAY(NO_ERROR) once the idle timeout passes.
func TestResponderIdleIgnoresPings(t *testing.T) {
	t.Parallel()
	lim := defaultResponderLimits
	lim.h2Idle = time.Second
	addr, _ := startResponder(t, ResponderConfig{}, lim)
	c := dialRawH2C(t, addr)
	start := time.Now()
	acked, g := c.pingEvery(t, 40, 100*time.Millisecond)
	if g == nil {
		t.Fatalf("no GOAWAY after %d PINGs over %v with a 1s idle timeout: PINGs now count as activity; revisit h2Idle", acked, time.Since(start))
	}
	if g.ErrCode != http2.ErrCodeNo || acked < 5 {
		t.Errorf("GOAWAY %v after %d ACKed PINGs, want NO_ERROR after about 10", g.ErrCode, acked)
	}
}

func TestResponderSettings(t *testing.T) {
	t.Parallel()
	addr, _ := startResponder(t, ResponderConfig{}, defaultResponderLimits)
	c := dialRawH2C(t, addr)
	got := map[http2.SettingID]uint32{}
	deadline := time.After(5 * time.Second)
	for len(got) < 3 {
		select {
		case s := <-c.setting:
			got[s.ID] = s.Val
		case <-deadline:
			t.Fatalf("server SETTINGS incomplete: %v", got)
		}
	}
	if v := got[http2.SettingMaxConcurrentStreams]; v != defaultResponderLimits.streams {
		t.Errorf("MAX_CONCURRENT_STREAMS = %d, want %d", v, defaultResponderLimits.streams)
	}
	if v, ok := got[http2.SettingMaxHeaderListSize]; !ok || v > 32<<10 {
		t.Errorf("MAX_HEADER_LIST_SIZE = %d (sent: %v), want at most 32KiB", v, ok)
	}
}

func TestResponderShutdownSendsGoAway(t *testing.T) {
	t.Parallel()
	addr, srv := startResponder(t, ResponderConfig{}, defaultResponderLimits)
	c := dialRawH2C(t, addr)
	if n, g := c.pingEvery(t, 1, time.Millisecond); n != 1 || g != nil {
		t.Fatalf("first PING: acked %d, GOAWAY %v", n, g)
	}
	go srv.Shutdown(t.Context())
	select {
	case g := <-c.goaway:
		if g.ErrCode != http2.ErrCodeNo {
			t.Errorf("GOAWAY %v on shutdown, want NO_ERROR", g.ErrCode)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown sent no GOAWAY to an h2c connection")
	}
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		t.Fatal("connection still open 5s after Shutdown")
	}
}
