package testbed

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/netprober/prober/lab"
)

// StartPrometheus starts prometheus in the namespace of s.Host with
// s.Config, listening on a free port of that namespace's 127.0.0.1, and
// waits until it is ready. On error nothing it started is left.
func StartPrometheus(ctx context.Context, f *lab.Fabric, s PrometheusSpec) (p *Prometheus, err error) {
	if s.Path == "" {
		if s.Path, err = LookPrometheus(); err != nil {
			return nil, err
		}
	}
	if s.Ready == 0 {
		s.Ready = 30 * time.Second
	}
	ns, err := f.Namespace(s.Host)
	if err != nil {
		return nil, err
	}
	// The port is free in the namespace now; nothing else there binds
	// loopback ports before prometheus does.
	var addr string
	if err := lab.Do(ns, func() error {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addr = l.Addr().String()
		return l.Close()
	}); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(s.TempDir, "prober-prometheus-")
	if err != nil {
		return nil, err
	}
	p = &Prometheus{dir: dir, client: &PromClient{URL: "http://" + addr, HTTP: lab.HTTPClient(ns, 5*time.Second)}}
	defer func() {
		if err != nil {
			// err says why; what Close would add is the same exit again.
			p.Close()
			p = nil
		}
	}()
	cfg, err := WriteConfig(dir, "prometheus", s.Config)
	if err != nil {
		return p, err
	}
	p.Process, err = StartProcess(ctx, f, ProcessSpec{Host: s.Host, Name: "prometheus", Path: s.Path, Dir: dir, Args: []string{
		"--config.file=" + cfg, "--storage.tsdb.path=" + filepath.Join(dir, "tsdb"),
		"--storage.tsdb.retention.time=1h", "--web.listen-address=" + addr, "--log.level=warn",
	}})
	if err != nil {
		return p, err
	}
	return p, p.waitOK(ctx, p.client.HTTP, p.client.URL+"/-/ready", s.Ready, "ready")
}
