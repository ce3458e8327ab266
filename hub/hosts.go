package hub

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/netprober/prober/config"
)

// hostNames are the names a request's Host may carry (config.Matrix
// Hosts): exact names, and "*.suffix" for every name under suffix.
type hostNames struct {
	exact    map[string]bool
	suffixes []string // ".example.com"
	// prefixes are the Service's names under any cluster domain:
	// "prober-matrix.prober.svc.".
	prefixes []string
}

// newHostNames allows cfg.Hosts, localhost, and with discovery the
// matrix's Service by each name the cluster's DNS gives it: the agents
// and an operator's port-forward reach it by them. An IP address is
// always allowed: a rebinding page has a name of its own, never one.
func newHostNames(cfg *config.Matrix) hostNames {
	h := hostNames{exact: map[string]bool{"localhost": true}, suffixes: []string{".localhost"}}
	add := func(name string) {
		name = strings.ToLower(strings.TrimSuffix(name, "."))
		if s, ok := strings.CutPrefix(name, "*"); ok {
			h.suffixes = append(h.suffixes, s)
		} else {
			h.exact[name] = true
		}
	}
	for _, n := range cfg.Hosts {
		add(n)
	}
	if cfg.Kubernetes != nil && cfg.Discovery == config.DiscoveryKubernetes {
		svc := config.MatrixService + "." + cfg.Kubernetes.Namespace
		add(config.MatrixService)
		add(svc)
		add(svc + ".svc")
		h.prefixes = append(h.prefixes, svc+".svc.")
	}
	return h
}

func (h hostNames) allowed(hostport string) bool {
	host := hostport
	if hp, _, err := net.SplitHostPort(hostport); err == nil {
		host = hp
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	if h.exact[host] {
		return true
	}
	for _, s := range h.suffixes {
		if strings.HasSuffix(host, s) && len(host) > len(s) {
			return true
		}
	}
	for _, p := range h.prefixes {
		if strings.HasPrefix(host, p) && len(host) > len(p) {
			return true
		}
	}
	return false
}

// check refuses a request whose Host is not one of the matrix's names,
// and a state-changing one (not GET or HEAD) whose Origin, when sent,
// is not one of them either: a page elsewhere may post to the matrix
// through an operator's browser, and the trace header is all that stops
// it otherwise.
func (h hostNames) check(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.allowed(r.Host) {
			http.Error(w, fmt.Sprintf("Host %.100q is not a name of this matrix: add it to the matrix's hosts: (a guard against DNS rebinding)", r.Host), http.StatusMisdirectedRequest)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && r.Method != http.MethodGet && r.Method != http.MethodHead {
			u, err := url.Parse(o)
			if err != nil || u.Host == "" || !h.allowed(u.Host) {
				http.Error(w, fmt.Sprintf("Origin %.100q is not a page of this matrix: a %s from another site is refused", o, r.Method), http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
