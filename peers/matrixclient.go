package peers

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// MatrixSelector selects the matrix's pods, as the chart labels them.
const MatrixSelector = "app.kubernetes.io/name=prober,app.kubernetes.io/component=matrix"

// MatrixClient reaches the matrix's HTTP API through a port-forward to
// its pod, as the user of a kubeconfig (kubectl prober): it needs what
// `kubectl port-forward` needs (list pods, create pods/portforward in
// the matrix's namespace) and no route to the pod network, and each call
// is one request to the matrix.
type MatrixClient struct {
	// Namespace and Pod are the matrix pod forwarded to.
	Namespace, Pod string
	// Base is the forward's local URL, http://127.0.0.1:PORT, or https
	// when the matrix serves TLS.
	Base     *url.URL
	client   *http.Client
	stop     chan struct{}
	stopOnce sync.Once
	// ended is closed when the forward has ended, err why.
	ended chan struct{}
	err   error
}

// KubeconfigOptions say which kubeconfig, context and namespace to use,
// as kubectl's own flags do: Path empty follows $KUBECONFIG and
// ~/.kube/config.
type KubeconfigOptions struct {
	Path, Context, Namespace string
}

// DialMatrix finds a Ready matrix pod in o.Namespace and forwards a
// port of address (a loopback address; port 0 picks a free one) to its
// HTTP port. userAgent names it in the API server's audit log. Close
// ends the forward.
func DialMatrix(ctx context.Context, o KubeconfigOptions, userAgent, address string, port int) (*MatrixClient, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = userAgent
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	pod, podPort, scheme, err := matrixPod(ctx, cs, o.Namespace)
	if err != nil {
		return nil, err
	}
	dialer, err := portForwardDialer(cfg, cs, o.Namespace, pod)
	if err != nil {
		return nil, err
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{address}, []string{fmt.Sprintf("%d:%d", port, podPort)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s/%s: %w", o.Namespace, pod, err)
	}
	tr := &http.Transport{Proxy: nil}
	if scheme == "https" {
		// The forward reaches this pod through the API server, which
		// authenticated both ends: the pod's certificate, made for its
		// Service's names and not for 127.0.0.1, adds nothing to check.
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}
	}
	c := &MatrixClient{Namespace: o.Namespace, Pod: pod, stop: stop, ended: make(chan struct{}),
		client: &http.Client{Transport: tr}}
	go func() {
		c.err = fw.ForwardPorts()
		close(c.ended)
	}()
	select {
	case <-ready:
	case <-c.ended:
		return nil, fmt.Errorf("port-forward to %s/%s: %w", o.Namespace, pod, c.err)
	case <-ctx.Done():
		c.Close()
		return nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		c.Close()
		return nil, fmt.Errorf("port-forward to %s/%s: no local port (%v)", o.Namespace, pod, err)
	}
	c.Base = &url.URL{Scheme: scheme, Host: joinHostPort(address, int(ports[0].Local))}
	return c, nil
}

func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(port)
}

// matrixPod is a Ready matrix pod of namespace ns, its HTTP port and
// the port's scheme: the chart names it https when the matrix serves TLS.
func matrixPod(ctx context.Context, cs kubernetes.Interface, ns string) (pod string, port int, scheme string, err error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pods, err := cs.CoreV1().Pods(ns).List(lctx, metav1.ListOptions{LabelSelector: MatrixSelector, Limit: 50})
	if err != nil {
		return "", 0, "", fmt.Errorf("list the matrix's pods in namespace %s: %w", ns, err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || !podReady(p) {
			continue
		}
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == "http" || cp.Name == "https" {
					port, scheme = int(cp.ContainerPort), cp.Name
				}
			}
		}
		if port == 0 {
			return "", 0, "", fmt.Errorf("matrix pod %s/%s has no container port named http or https", ns, p.Name)
		}
		return p.Name, port, scheme, nil
	}
	return "", 0, "", fmt.Errorf("no Ready matrix pod in namespace %s (%d found; kubectl -n %s get pods -l %s; -n for another namespace)", ns, len(pods.Items), ns, MatrixSelector)
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// portForwardDialer dials pod's portforward subresource as kubectl
// does: over WebSockets, falling back to SPDY for an API server that
// does not upgrade them.
func portForwardDialer(cfg *rest.Config, cs kubernetes.Interface, ns, pod string) (httpstream.Dialer, error) {
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	ws, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	return portforward.NewFallbackDialer(ws, spdyDialer, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	}), nil
}

// Close ends the port-forward and waits for it.
func (c *MatrixClient) Close() {
	c.stopOnce.Do(func() { close(c.stop) })
	c.client.CloseIdleConnections()
	<-c.ended
}

// Wait returns when the port-forward ends: ctx done (then it closes it,
// and returns nil) or the connection to the pod lost.
func (c *MatrixClient) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		c.Close()
		return nil
	case <-c.ended:
		err := c.err
		if err == nil {
			err = errors.New("the port-forward ended")
		}
		return fmt.Errorf("port-forward to %s/%s: %w", c.Namespace, c.Pod, err)
	}
}

// AnswerError is an answer of the matrix other than 2xx.
type AnswerError struct {
	Method, Path string
	Status       int
	// RetryAfter is the answer's Retry-After, 0 when it has none: a
	// trace refused while its agent's trace budget refills says when.
	RetryAfter time.Duration
	Message    string
}

func (e *AnswerError) Error() string {
	return fmt.Sprintf("%s %s: the matrix answered %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Message)
}

// maxAnswer bounds what one answer may hold: the matrix's largest, its
// whole matrix at 10,000 nodes grouped by rack, is far below it.
const maxAnswer = 256 << 20

// Call sends method to path?query on the matrix with header, and decodes
// its JSON answer into into. Errors say what the matrix answered.
func (c *MatrixClient) Call(ctx context.Context, method, path string, query url.Values, header http.Header, into any) error {
	u := c.Base.JoinPath(path)
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s on %s/%s: %w", method, path, c.Namespace, c.Pod, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 500 {
			msg = msg[:500] + "..."
		}
		e := &AnswerError{Method: method, Path: path, Status: resp.StatusCode, Message: msg}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
		return e
	}
	if len(body) > maxAnswer {
		return fmt.Errorf("%s %s: the answer is over %d MiB", method, path, maxAnswer>>20)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// Proxy serves the matrix to a browser on loopback in plain HTTP, as
// the forward does for a matrix without TLS: requests keep their Host,
// which the matrix checks, and go to the forward over TLS.
func (c *MatrixClient) Proxy() http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(c.Base)
			r.Out.Host = r.In.Host
		},
		Transport: c.client.Transport,
	}
}
