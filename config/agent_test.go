package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/probe"
)

func TestGoodConfigs(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/good/*.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata/good files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := LoadAgent(f)
			if err != nil {
				t.Fatalf("LoadAgent: %v", err)
			}
			if c.Probing.Interval.D() <= 0 || c.Probing.Flows <= 0 || len(c.Probing.Protocols) == 0 {
				t.Errorf("defaults not applied: %+v", c.Probing)
			}
			if !c.SourceAddr().IsValid() || c.SourceAddr().IsUnspecified() {
				t.Errorf("SourceAddr = %v", c.SourceAddr())
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := LoadAgent("testdata/good/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Probing.Interval.D() != time.Second || c.Probing.Window.D() != time.Minute || c.Probing.Flows != 8 ||
		c.Probing.MaxProbesPerSecond != 200 || !c.PerTarget() || c.Targets[0].Port != DefaultPort {
		t.Errorf("defaults: %+v perTarget %v port %d", c.Probing, c.PerTarget(), c.Targets[0].Port)
	}
}

// A dns: block's target defaults to port 53 and the API server's name.
func TestDNSDefaults(t *testing.T) {
	t.Parallel()
	c, err := LoadAgent("testdata/good/dns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		port  int
		query string
	}{"n21": {DefaultPort, ""}, "dns1": {53, "kubernetes.default.svc.cluster.local."}, "coredns-a": {DefaultDNSPort, probe.DefaultDNSQuery}}
	for _, tg := range c.Targets {
		query := ""
		if tg.DNS != nil {
			query = tg.DNS.Query
		}
		if w := want[tg.Name]; tg.Port != w.port || query != w.query {
			t.Errorf("%s: port %d query %q, want %d %q", tg.Name, tg.Port, query, w.port, w.query)
		}
	}
}

func TestHTTP2Defaults(t *testing.T) {
	t.Parallel()
	c, err := LoadAgent("testdata/good/http2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Probing.HTTP2.DeadAfter != 5 || c.TLS == nil || c.TLS.CertFile == "" {
		t.Errorf("probing.http2 %+v, tls %+v", c.Probing.HTTP2, c.TLS)
	}
	want := map[string]string{"n21": HTTP2H2C, "n22": HTTP2None, "n23": HTTP2TLS, "api-vip": HTTP2TLS}
	for _, tg := range c.Targets {
		if tg.HTTP2 != want[tg.Name] {
			t.Errorf("%s: http2 %q, want %q", tg.Name, tg.HTTP2, want[tg.Name])
		}
	}
	m, err := LoadAgent("testdata/good/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m.Probing.HTTP2.DeadAfter != DefaultDeadAfter || m.TLS != nil || m.Targets[0].HTTP2 != HTTP2H2C {
		t.Errorf("minimal: deadAfter %d, tls %+v, n21 http2 %q", m.Probing.HTTP2.DeadAfter, m.TLS, m.Targets[0].HTTP2)
	}
}

// The tests pin the field each message names, not the libraries' wording.
func TestBadConfigs(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"unknown-field":           {"probing.intervall", "unknown field"},
		"bad-class":               {"class", `"router"`, "node, pod"},
		"missing-name":            {"name: required"},
		"bad-duration":            {"probing.timeout"},
		"bad-protocol":            {"probing.protocols[1]", `"udp"`, "icmp, tcp_syn, http2_ping, dns"},
		"bad-target":              {"targets[0].address", "198.18.2.300"},
		"target-unspecified":      {"targets[0].address", `"0.0.0.0"`, "unspecified"},
		"duplicate-target":        {"targets[1].name", "targets[0]"},
		"duplicate-key":           {`"name"`},
		"bad-listen":              {"listen"},
		"unspecified-no-source":   {"source: required"},
		"too-many-flows":          {"probing.flows", "65"},
		"window-short":            {"probing.window"},
		"wrong-type":              {"probing.flows", "number"},
		"empty":                   {"empty"},
		"k8s-static-targets":      {"targets: must be empty with discovery: kubernetes"},
		"k8s-fields":              {"kubernetes.namespace", `"Prober_NS"`, "kubernetes.agentPort: the matrix's setting", "kubernetes.rackLabel: the matrix's setting", "kubernetes.matrix", `"prober-matrix:9809"`},
		"k8s-without-discovery":   {"kubernetes: set, but discovery is static"},
		"bad-discovery":           {"discovery", `"consul"`, "static, kubernetes"},
		"bad-trace":               {"probing.trace.interval", "probing.trace.budgetPerMinute", "probing.trace.maxTTL"},
		"http2-mode":              {"targets[0].http2", `"h3"`, "h2c, tls, none"},
		"cafile-missing":          {"targets[0].caFile", "/nonexistent/ca.pem"},
		"cafile-not-pem":          {"targets[0].caFile", "no PEM certificate"},
		"cafile-and-insecure":     {"targets[0].insecureSkipVerify", "caFile"},
		"http2-tls-fields-on-h2c": {"targets[0].serverName: needs http2: tls", "targets[0].insecureSkipVerify: needs http2: tls"},
		"dead-after":              {"probing.http2.deadAfter", "-1"},
		"tls-half":                {"tls.keyFile: required"},
		"tls-empty":               {"tls: set certFile and keyFile, or selfSigned"},
		"tls-both":                {"tls: ", "not both"},
		"tls-bad-pair":            {"tls.certFile", "/nonexistent/key.pem", "tls.hosts: only for selfSigned"},
		"lb-icmp-only":            {"targets[1].class: lb target would not be probed", "no icmp", "tcp_syn"},
		"k8s-ca-file":             {"kubernetes.apiServerCAFile", "/nonexistent/ca.crt"},
		"dns":                     {"targets[0].dns: probing.protocols does not list dns", "targets[0].dns.query", `"a..b."`, "targets[0].class: lb target would not be probed"},
	}
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(files) != len(want) {
		t.Errorf("%d bad files, %d expectations", len(files), len(want))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			_, err := LoadAgent(f)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, f+": ") {
				t.Errorf("message does not start with the file name: %q", msg)
			}
			for _, w := range want[name] {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
		})
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	t.Parallel()
	_, err := ParseAgent("x.yaml", []byte("class: x\nprobing: {flows: 100, protocols: [udp]}\ntargets: [{name: a, address: nope, class: foo, port: 70000}]\n"))
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	for _, field := range []string{"name", "class", "listen", "probing.flows", "probing.protocols[0]", "targets[0].address", "targets[0].class", "targets[0].port"} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, "x.yaml: "+field+":")
		}
		if !found {
			t.Errorf("no line for %s in:\n%s", field, err)
		}
	}
}

func FuzzConfig(f *testing.F) {
	for _, dir := range []string{"testdata/good", "testdata/bad"} {
		files, _ := filepath.Glob(dir + "/*.yaml")
		for _, file := range files {
			b, _ := os.ReadFile(file)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseAgent("fuzz.yaml", b)
		if err == nil && (c.Validate() != nil || !c.SourceAddr().IsValid()) {
			t.Fatalf("accepted a config that does not validate: %s", b)
		}
	})
}

// TestDualStackConfig: a source per family, a target per family under one
// name, and a target of a family the agent has no source of refused.
func TestDualStackConfig(t *testing.T) {
	t.Parallel()
	const base = "name: n11\nclass: node\nlisten: 192.0.2.11:9808\n"
	good := base + "source: 192.0.2.11,2001:db8::11\ntargets:\n" +
		"- {name: n21, address: 192.0.2.21, class: node}\n- {name: n21, address: 2001:db8::21, class: node}\n"
	c, err := ParseAgent("dual.yaml", []byte(good))
	if err != nil {
		t.Fatalf("dual-stack config refused: %v", err)
	}
	if got := c.SourceAddrs(); len(got) != 2 || got[0].String() != "192.0.2.11" || got[1].String() != "2001:db8::11" {
		t.Errorf("sources %v", got)
	}
	if c.SourceFor("ipv6").String() != "2001:db8::11" || c.SourceAddr().String() != "192.0.2.11" {
		t.Errorf("source for ipv6 %v, first %v", c.SourceFor("ipv6"), c.SourceAddr())
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"two of a family": {base + "source: 192.0.2.11,192.0.2.12\n", "at most one address per family"},
		"unspecified":     {base + "source: \"::\"\n", "unspecified"},
		"no v6 source":    {base + "targets: [{name: n21, address: 2001:db8::21, class: node}]\n", "targets[0].address: \"2001:db8::21\" is ipv6, and no source of that family"},
		"same family twice": {base + "source: 192.0.2.11,2001:db8::11\ntargets:\n" +
			"- {name: n21, address: 2001:db8::21, class: node}\n- {name: n21, address: 2001:db8::22, class: node}\n", "targets[1].name: \"n21\" already used by targets[0] for the same address family"},
		"zoned": {base + "targets: [{name: n21, address: \"fe80::1%eth0\", class: node}]\n", "without zone"},
	} {
		_, err := ParseAgent(name+".yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
