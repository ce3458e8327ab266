package peers

import (
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// LogThrough sends client-go's own log (its leader election, its watches'
// retries), which goes through klog, to log: the process writes one
// format. klog is the library's process-wide logger: call it once, from
// main.
func LogThrough(log *slog.Logger) {
	klog.SetSlogLogger(log)
}

// NewClient connects with the kubeconfig file at path, or in-cluster (the
// pod's ServiceAccount) when path is empty. userAgent names prober in the
// API server's logs and audit, so its requests can be told apart.
func NewClient(path, userAgent string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if path == "" {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("in-cluster kubernetes config (set kubernetes.kubeconfig outside a cluster): %w", err)
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg.UserAgent = userAgent
	// Protobuf is cheaper than JSON for the API server to encode, and
	// every Node update is sent to every agent.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	// Informers make one list and one watch per resource; a low rate limit
	// keeps re-lists after a disconnect from thousands of agents gentle.
	cfg.QPS, cfg.Burst = 2, 5
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}
