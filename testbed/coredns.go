package testbed

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// CoreDNSSpec says how to run CoreDNS, the DNS every Kubernetes
// distribution runs, in a lab namespace: authoritative for Zone, every A
// question in it answered with Answer, every other name refused (as a
// cluster DNS without upstreams would).
type CoreDNSSpec struct {
	// Host is the lab host whose namespace it runs in.
	Host string
	// Path is the coredns program; "" looks it up (LookCoreDNS).
	Path string
	// Addrs are the addresses it serves on, port 53, UDP and TCP.
	Addrs []netip.Addr
	// Zone is the zone it answers, "cluster.local." when empty.
	Zone string
	// Answer is the address of every A record: data, never dialled;
	// 192.0.2.1 when invalid.
	Answer netip.Addr
	// Dir holds its Corefile and log; it must exist.
	Dir string
	// Ready bounds the wait until it answers; 0 means 15 s.
	Ready time.Duration
}

// LookCoreDNS finds the coredns program: in PROBER_KUBE_ASSETS, where
// hack/kube/build.sh (make kube, make test) builds it, else on PATH.
func LookCoreDNS() (string, error) {
	if dir := os.Getenv("PROBER_KUBE_ASSETS"); dir != "" {
		p := filepath.Join(dir, "coredns")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("coredns")
	if err != nil {
		return "", fmt.Errorf("coredns not found in PROBER_KUBE_ASSETS or on PATH (hack/kube/build.sh builds it: make kube): %w", err)
	}
	return p, nil
}

// withDefaults fills Zone, Answer and Ready.
func (s CoreDNSSpec) withDefaults() CoreDNSSpec {
	if s.Zone == "" {
		s.Zone = "cluster.local."
	}
	if !s.Answer.IsValid() {
		s.Answer = netip.AddrFrom4([4]byte{192, 0, 2, 1})
	}
	if s.Ready == 0 {
		s.Ready = 15 * time.Second
	}
	return s
}

// corefile is s's configuration; s has its defaults.
func (s CoreDNSSpec) corefile() string {
	zone, answer := s.Zone, s.Answer
	binds := make([]string, len(s.Addrs))
	for i, a := range s.Addrs {
		binds[i] = a.String()
	}
	// The template plugin answers every A question of the zone; an AAAA
	// question gets NOERROR without records. Names outside every zone
	// are refused: there is no upstream to forward to.
	return fmt.Sprintf(`%[1]s:53 {
    bind %[2]s
    template IN A %[1]s {
        answer "{{ .Name }} 5 IN A %[3]s"
    }
    template IN AAAA %[1]s {
        rcode NOERROR
    }
    errors
}
`, zone, strings.Join(binds, " "), answer)
}
