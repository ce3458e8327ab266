package config

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/probe"
)

// HTTP/2 modes of a target (targets[].http2): api's, named here for
// the config's readers.
const (
	HTTP2H2C  = api.HTTP2H2C
	HTTP2TLS  = api.HTTP2TLS
	HTTP2None = api.HTTP2None
)

// HTTP2Probing configures http2_ping (probing.http2).
type HTTP2Probing struct {
	// DeadAfter is how many PINGs in a row may go unanswered before the
	// connection is declared dead, closed and redialled.
	DeadAfter int `json:"deadAfter,omitempty"`
}

// DefaultDeadAfter is probing.http2.deadAfter's default; its range is
// probe.HTTP2Config.Check's (1..probe.MaxHTTP2DeadAfter).
const DefaultDeadAfter = probe.DefaultHTTP2DeadAfter

// ServerTLS makes the agent serve TLS on its listen address (the tls
// block): HTTP/2 by ALPN and HTTP/1.1, instead of cleartext HTTP/1.1 and
// h2c. Either certFile and keyFile, or selfSigned: true for a pair
// generated at start (hosts: extra names or addresses for it, beside the
// listen address); an agent reads them once, at start. The matrix's tls
// block takes certFile and keyFile only (config.Matrix.TLS).
type ServerTLS struct {
	CertFile   string   `json:"certFile,omitempty"`
	KeyFile    string   `json:"keyFile,omitempty"`
	SelfSigned bool     `json:"selfSigned,omitempty"`
	Hosts      []string `json:"hosts,omitempty"`
}

// validate checks the block for the agent and the matrix, reading the
// files so that --check reports a missing or mismatched one.
func (s *ServerTLS) validate(bad func(field, format string, args ...any)) {
	switch {
	case s.SelfSigned && (s.CertFile != "" || s.KeyFile != ""):
		bad("tls", "set certFile and keyFile, or selfSigned: true, not both")
	case s.SelfSigned:
	case s.CertFile == "" && s.KeyFile == "":
		bad("tls", "set certFile and keyFile, or selfSigned: true for a generated pair")
	case s.CertFile == "":
		bad("tls.certFile", "required with tls.keyFile")
	case s.KeyFile == "":
		bad("tls.keyFile", "required with tls.certFile")
	default:
		if _, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile); err != nil {
			bad("tls.certFile", "%s with keyFile %s: %v", s.CertFile, s.KeyFile, err)
		}
	}
	if len(s.Hosts) > 0 && !s.SelfSigned {
		bad("tls.hosts", "only for selfSigned: true (a certificate file names its own hosts)")
	}
	for i, h := range s.Hosts {
		if h == "" {
			bad(fmt.Sprintf("tls.hosts[%d]", i), "empty")
		}
	}
}

func (c *Agent) setHTTP2Defaults() {
	if c.Probing.HTTP2.DeadAfter == 0 {
		c.Probing.HTTP2.DeadAfter = DefaultDeadAfter
	}
	for i := range c.Targets {
		if c.Targets[i].HTTP2 == "" {
			c.Targets[i].HTTP2 = api.DefaultHTTP2(c.Targets[i].Class)
		}
	}
}

// validateHTTP2 checks the tls block, probing.http2 and the targets'
// HTTP/2 fields. It reads the certificate and CA files, so that --check
// reports a missing or unreadable one.
func (c *Agent) validateHTTP2(bad func(field, format string, args ...any)) {
	// The pinger's ranges are probe's: the check NewHTTP2Pinger runs.
	c.HTTP2Config().Check(func(field, format string, args ...any) {
		switch field {
		case "timeout", "minBackoff":
			return // probing.timeout and probing.interval, checked for every protocol
		case "deadAfter":
			field = "probing.http2.deadAfter"
		default:
			field = "probing.http2" // set by the agent, not the file
		}
		bad(field, format, args...)
	})
	if s := c.TLS; s != nil {
		s.validate(bad)
	}
	for i, t := range c.Targets {
		f := fmt.Sprintf("targets[%d]", i)
		if !api.ValidHTTP2(t.HTTP2) {
			bad(f+".http2", "%q not one of h2c, tls, none", t.HTTP2)
			continue
		}
		// Which fields need tls: the pinger's own check, per target.
		c.TargetHTTP2Config(t).Check(func(field, format string, args ...any) {
			switch field {
			case "caFile", "serverName", "insecureSkipVerify":
				if t.HTTP2 != HTTP2TLS {
					format, args = "needs http2: tls (http2 is %s)", []any{t.HTTP2}
				}
				bad(f+"."+field, format, args...)
			}
		})
		if t.CAFile != "" {
			if err := checkCAFile(t.CAFile); err != nil {
				bad(f+".caFile", "%v", err)
			}
		}
	}
}

// HTTP2Config is the probe.HTTP2Config of every http2_ping target, before
// the target's own fields (TargetHTTP2Config): the PING timeout is
// probing.timeout, and redials after failed ones wait at most 10
// intervals, so that a target is healthy again soon after a long outage
// ends, and at most 30s, so that thousands of agents do not hammer a dead
// LB.
func (c *Agent) HTTP2Config() probe.HTTP2Config {
	interval := c.Probing.Interval.D()
	hc := probe.HTTP2Config{
		Timeout:    c.Probing.Timeout.D(),
		DeadAfter:  c.Probing.HTTP2.DeadAfter,
		MinBackoff: min(probe.DefaultHTTP2MinBackoff, interval),
		MaxBackoff: min(probe.DefaultHTTP2MaxBackoff, 10*interval),
	}
	hc.SetDefaults()
	return hc
}

// TargetHTTP2Config is HTTP2Config with a static target's TLS fields.
func (c *Agent) TargetHTTP2Config(t Target) probe.HTTP2Config {
	hc := c.HTTP2Config()
	hc.TLS = cmp.Or(t.HTTP2, api.DefaultHTTP2(t.Class)) == HTTP2TLS
	hc.ServerName, hc.CAFile, hc.InsecureSkipVerify = t.ServerName, t.CAFile, t.InsecureSkipVerify
	return hc
}

// checkCAFile reads a PEM CA bundle as the prober will.
func checkCAFile(name string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return fmt.Errorf("%s: no PEM certificate in it", name)
	}
	return nil
}
