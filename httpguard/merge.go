package httpguard

import (
	"errors"
	"net"
	"sync"
)

// Merge is one listener over several (a node agent on each of its node's
// addresses): Accept returns the next connection of any, Addr is the
// first's, Close closes them all. A listener's error other than its close
// ends every Accept with that error.
func Merge(lns ...net.Listener) net.Listener {
	if len(lns) == 1 {
		return lns[0]
	}
	m := &merged{lns: lns, conns: make(chan net.Conn), done: make(chan struct{})}
	for _, ln := range lns {
		go m.accept(ln)
	}
	return m
}

type merged struct {
	lns   []net.Listener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	err   error
}

func (m *merged) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			m.fail(err)
			return
		}
		select {
		case m.conns <- c:
		case <-m.done:
			c.Close()
			return
		}
	}
}

// fail ends the merged listener with err (net.ErrClosed after Close).
func (m *merged) fail(err error) {
	m.mu.Lock()
	if m.err == nil {
		m.err = err
	}
	m.mu.Unlock()
	m.once.Do(func() { close(m.done) })
}

func (m *merged) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		m.mu.Lock()
		defer m.mu.Unlock()
		return nil, m.err
	}
}

func (m *merged) Close() error {
	m.fail(net.ErrClosed)
	var errs []error
	for _, ln := range m.lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *merged) Addr() net.Addr { return m.lns[0].Addr() }
