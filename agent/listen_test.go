package agent

import (
	"log/slog"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/netprober/prober/config"
)

// TestNodeAgentBindsItsNode: a node agent in a cluster whose listen
// address is unspecified binds its node's addresses (its sources) and
// loopback, not every interface of the node (issue 30: under hostNetwork
// 0.0.0.0 is a CNI's gateway and any public NIC too, where no
// NetworkPolicy reaches). Anything else binds listen as given.
func TestNodeAgentBindsItsNode(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"class: node\nlisten: 0.0.0.0:9808\nsource: 192.0.2.11,2001:db8::11\ndiscovery: kubernetes\n", []string{"192.0.2.11:9808", "[2001:db8::11]:9808", "127.0.0.1:9808"}},
		{"class: node\nlisten: '[::]:9808'\nsource: 192.0.2.11\ndiscovery: kubernetes\n", []string{"192.0.2.11:9808", "127.0.0.1:9808"}},
		{"class: pod\nlisten: 0.0.0.0:9808\nsource: 192.0.2.11\ndiscovery: kubernetes\n", []string{"0.0.0.0:9808"}},
		{"class: node\nlisten: 0.0.0.0:9808\nsource: 192.0.2.11\n", []string{"0.0.0.0:9808"}},
		{"class: node\nlisten: 192.0.2.12:9808\nsource: 192.0.2.11\ndiscovery: kubernetes\n", []string{"192.0.2.12:9808"}},
	} {
		cfg, err := config.ParseAgent("t.yaml", []byte("name: n1\n"+tc.yaml))
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if got := listenAddrs(cfg); !slices.Equal(got, tc.want) {
			t.Errorf("%s: listens on %v, want %v", tc.yaml, got, tc.want)
		}
	}

	cfg, err := config.ParseAgent("t.yaml", []byte("name: n1\nclass: node\nlisten: 0.0.0.0:0\nsource: 127.0.0.3\ndiscovery: kubernetes\nprobing: {protocols: [http2_ping]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(runtimeConfig(t, cfg), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.ln.Close(); a.closeEngines() })
	go a.srv.Serve(a.ln)
	port := a.Addr().(*net.TCPAddr).Port
	if ip := a.Addr().(*net.TCPAddr).IP.String(); ip != "127.0.0.3" {
		t.Errorf("Addr %v, want the node's address 127.0.0.3 first", a.Addr())
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, ip := range []string{"127.0.0.3", "127.0.0.1"} {
		resp, err := client.Get("http://" + net.JoinHostPort(ip, itoa(port)) + "/healthz")
		if err != nil {
			t.Errorf("/healthz on %s: %v", ip, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/healthz on %s: %s", ip, resp.Status)
		}
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.4", itoa(port)), time.Second); err == nil {
		c.Close()
		t.Error("the agent answers on 127.0.0.4, an address of no source")
	}
}
