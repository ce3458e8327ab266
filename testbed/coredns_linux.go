package testbed

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/probe"
)

// CoreDNS is a CoreDNS server started by StartCoreDNS.
type CoreDNS struct {
	*Process
}

// StartCoreDNS runs CoreDNS as s says and waits until it answers a
// lookup of its zone over UDP and TCP on its first address.
func StartCoreDNS(ctx context.Context, f *lab.Fabric, s CoreDNSSpec) (c *CoreDNS, err error) {
	if s.Path == "" {
		if s.Path, err = LookCoreDNS(); err != nil {
			return nil, err
		}
	}
	if len(s.Addrs) == 0 {
		return nil, errors.New("coredns: no address to serve on")
	}
	s = s.withDefaults()
	ns, err := f.Namespace(s.Host)
	if err != nil {
		return nil, err
	}
	name := "coredns-" + s.Host
	conf := filepath.Join(s.Dir, name+".Corefile")
	if err := os.WriteFile(conf, []byte(s.corefile()), 0o644); err != nil {
		return nil, err
	}
	p, err := StartProcess(ctx, f, ProcessSpec{Host: s.Host, Name: name, Path: s.Path, Dir: s.Dir, Args: []string{"-conf", conf}})
	if err != nil {
		return nil, err
	}
	c = &CoreDNS{Process: p}
	query := "kubernetes.default.svc." + s.Zone
	server := netip.AddrPortFrom(s.Addrs[0], 53)
	deadline := time.Now().Add(s.Ready)
	var last probe.Result
	for time.Now().Before(deadline) {
		if err := p.exited(); err != nil {
			return nil, p.failure(err)
		}
		ok := true
		err := lab.Do(ns, func() error {
			for _, tcp := range []bool{false, true} {
				fl, err := probe.NewDNSFlow(probe.DNSConfig{Source: s.Addrs[0], Server: server, Query: query, TCP: tcp})
				if err != nil {
					return err
				}
				last = fl.Probe(ctx, time.Second)
				fl.Close()
				ok = ok && last.Outcome == probe.OK
			}
			return nil
		})
		if err != nil {
			c.Close()
			return nil, err
		}
		if ok {
			return c, nil
		}
		select {
		case <-ctx.Done():
			c.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	c.Close()
	return nil, p.failure(fmt.Errorf("not answering %s at %s within %s (last: %s %s %v)", query, server, s.Ready, last.Outcome, last.Reason, last.Err))
}
