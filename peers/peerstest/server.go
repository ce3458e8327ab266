package peerstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// AdvertiseAddress is what the API server publishes as its address in the
// kubernetes Service's EndpointSlice, from 198.18.0.0/15: an address no
// test dials.
const AdvertiseAddress = "198.19.255.254"

// Server is a running etcd + kube-apiserver pair.
type Server struct {
	// URL is the API server's https://127.0.0.1:port.
	URL string
	// Dir holds the PKI, kubeconfigs, data and logs.
	Dir   string
	bins  string
	token string
	ca    []byte
	procs []*exec.Cmd
}

// Start starts etcd and kube-apiserver on random loopback ports and waits
// until /readyz answers. Stop (or the caller's cleanup) ends them and
// removes dir's contents when the caller owns dir.
func Start(bins, dir string) (s *Server, err error) {
	s = &Server{Dir: dir, bins: bins}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if s.ca, err = writePKI(dir); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	b := make([]byte, 16)
	rand.Read(b)
	s.token = hex.EncodeToString(b)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(s.token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, err
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	if err := s.spawn("etcd",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL,
		"--listen-metrics-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
		"--unsafe-no-fsync", "--log-level", "warn",
	); err != nil {
		return nil, err
	}
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[3])
	if err := s.spawn("kube-apiserver",
		"--etcd-servers", etcdURL,
		// The advertise address is only published, in the kubernetes
		// Service's endpoints (which refuse loopback), never dialled: the
		// API server listens on, and calls itself at, the bind address.
		"--bind-address", "127.0.0.1", "--advertise-address", AdvertiseAddress,
		"--secure-port", fmt.Sprint(ports[3]),
		"--tls-cert-file", filepath.Join(dir, "serving.crt"),
		"--tls-private-key-file", filepath.Join(dir, "serving.key"),
		"--service-account-key-file", filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", "198.51.100.0/24",
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "RBAC",
		// No controller-manager creates default ServiceAccounts here.
		"--disable-admission-plugins", "ServiceAccount",
		"--allow-privileged=true",
		"--profiling=false",
	); err != nil {
		return nil, err
	}
	if err := s.waitReady(90 * time.Second); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) spawn(name string, args ...string) error {
	log, err := os.Create(filepath.Join(s.Dir, name+".log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(s.bins, name), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.procs = append(s.procs, cmd)
	return nil
}

// Stop ends kube-apiserver then etcd: SIGTERM, then SIGKILL after 10s.
func (s *Server) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		cmd := s.procs[i]
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	s.procs = nil
}

// Log is the tail of a component's log, for failure messages.
func (s *Server) Log(name string) string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, name+".log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		for _, p := range s.procs {
			if p.ProcessState != nil {
				return fmt.Errorf("%s exited: %s", filepath.Base(p.Path), s.Log(filepath.Base(p.Path)))
			}
		}
		body, err := s.Get("/readyz")
		if err == nil && strings.TrimSpace(body) == "ok" {
			return nil
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %s (%v): %s", timeout, last, s.Log("kube-apiserver"))
}

func (s *Server) httpClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// Get fetches path (such as /metrics) as the admin.
func (s *Server) Get(path string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.httpClient().Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), err
}

// Kubeconfig writes a kubeconfig for the admin, impersonating as when it
// is not empty (such as system:serviceaccount:prober:prober-agent), and
// returns its path.
func (s *Server) Kubeconfig(name, as string) (string, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: %s\n    certificate-authority-data: %s\n",
		s.URL, base64.StdEncoding.EncodeToString(s.ca))
	fmt.Fprintf(&b, "users:\n- name: user\n  user:\n    token: %s\n", s.token)
	if as != "" {
		fmt.Fprintf(&b, "    as: %s\n", as)
	}
	b.WriteString("contexts:\n- name: test\n  context: {cluster: test, user: user}\ncurrent-context: test\n")
	p := filepath.Join(s.Dir, name+".kubeconfig")
	return p, os.WriteFile(p, b.Bytes(), 0o600)
}

// AdminClient is a client-go clientset as the admin, with a rate limit
// high enough to create thousands of objects quickly. It drops the API
// server's warnings: deploy/'s namespace warns at the baseline Pod
// Security level, which every hostNetwork node agent pod a test creates
// would print.
func (s *Server) AdminClient() (kubernetes.Interface, error) {
	path, err := s.Kubeconfig("admin", "")
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	return kubernetes.NewForConfig(cfg)
}

// CAFile is the PEM file of the CA that verifies the API server, as a
// pod's ServiceAccount ca.crt does in a cluster.
func (s *Server) CAFile() string { return filepath.Join(s.Dir, "serving.crt") }

// RESTConfig is the admin's rest.Config.
func (s *Server) RESTConfig() *rest.Config {
	return &rest.Config{Host: s.URL, BearerToken: s.token, TLSClientConfig: rest.TLSClientConfig{CAData: s.ca}}
}

// Kubectl runs the pinned kubectl with the admin kubeconfig.
func (s *Server) Kubectl(ctx context.Context, args ...string) (string, error) {
	path, err := s.Kubeconfig("admin", "")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(s.bins, "kubectl"), append([]string{"--kubeconfig", path}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), fmt.Errorf("kubectl %s: exit %d", strings.Join(args, " "), ee.ExitCode())
	}
	return out.String(), err
}

// freePorts reserves n distinct loopback ports by listening, then frees
// them for the children (a small race, acceptable in tests).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
