//go:build linux

package probe

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// rawSocket is a raw IPv4 socket for one IP protocol, with IP_HDRINCL set,
// read through Go's netpoller so Close unblocks the reader.
type rawSocket interface {
	send(pkt []byte, dst netip.Addr) error
	// recv returns a whole IPv4 packet, header included, and its arrival time.
	recv(buf []byte) (int, time.Time, error)
	reserve(port uint16) error
	close()
}

var errClosed = net.ErrClosed

type linuxRaw struct {
	conn     *net.IPConn
	rc       syscall.RawConn
	src      netip.Addr
	reserved []int // fds of sockets bound to reserve source ports

	// The reader's state. One goroutine calls recv, and a read function
	// made once allocates nothing per packet, where a closure over recv's
	// variables and recvfrom's source address took three allocations.
	rbuf   []byte
	rn     int
	rerr   error
	readFn func(fd uintptr) bool
}

// openTCPRaw opens the tcp_syn socket. The kernel delivers it every TCP
// segment for our address; a classic BPF filter on the destination port
// makes it wake only for the reserved range, so a busy node's traffic
// costs nothing.
func openTCPRaw(src netip.Addr, base, n uint16) (*linuxRaw, error) {
	return openRaw("ip4:tcp", "tcp_syn", src, []bpf.Instruction{
		bpf.LoadMemShift{Off: 0},          // x = IP header length
		bpf.LoadIndirect{Off: 2, Size: 2}, // a = TCP destination port
		bpf.JumpIf{Cond: bpf.JumpLessThan, Val: uint32(base), SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: uint32(base) + uint32(n), SkipTrue: 1},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	})
}

// openRaw opens a raw IPv4 socket for network ("ip4:tcp") on src with
// IP_HDRINCL and the classic BPF filter; what names it in errors.
func openRaw(network, what string, src netip.Addr, filter []bpf.Instruction) (*linuxRaw, error) {
	prog, err := bpf.Assemble(filter)
	if err != nil {
		return nil, fmt.Errorf("%s bpf: %w", what, err)
	}
	pc, err := net.ListenPacket(network, src.String())
	if err != nil {
		return nil, privilegeError(what, err)
	}
	r := &linuxRaw{conn: pc.(*net.IPConn), src: src}
	r.readFn = r.read
	if r.rc, err = r.conn.SyscallConn(); err == nil {
		err = r.setup(prog)
	}
	if err != nil {
		pc.Close()
		return nil, err
	}
	return r, nil
}

func (r *linuxRaw) setup(prog []bpf.RawInstruction) error {
	filter := make([]unix.SockFilter, len(prog))
	for i, ins := range prog {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	var serr error
	err := r.rc.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_HDRINCL, 1); serr != nil {
			serr = os.NewSyscallError("setsockopt IP_HDRINCL", serr)
			return
		}
		fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
		if serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); serr != nil {
			serr = os.NewSyscallError("setsockopt SO_ATTACH_FILTER", serr)
		}
	})
	return errors.Join(err, serr)
}

func (r *linuxRaw) send(pkt []byte, dst netip.Addr) error {
	_, err := r.conn.WriteToIP(pkt, &net.IPAddr{IP: dst.AsSlice()})
	return err
}

func (r *linuxRaw) recv(buf []byte) (int, time.Time, error) {
	r.rbuf = buf
	err := r.rc.Read(r.readFn)
	r.rbuf = nil
	at := time.Now()
	if err != nil {
		return 0, at, err
	}
	if r.rerr != nil {
		return 0, at, os.NewSyscallError("read", r.rerr)
	}
	return r.rn, at, nil
}

// read reads one packet into r.rbuf; false asks the poller to wait.
// A packet longer than the buffer is cut to it.
func (r *linuxRaw) read(fd uintptr) bool {
	r.rn, r.rerr = unix.Read(int(fd), r.rbuf)
	return r.rerr != unix.EAGAIN
}

// reserve binds a TCP socket to (src, port) without listening: the kernel
// then never hands the port to another socket's connect or bind, and a
// SYN-ACK to it still meets no listener, so the kernel resets it.
func (r *linuxRaw) reserve(port uint16) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(port), Addr: r.src.As4()}); err != nil {
		unix.Close(fd)
		return os.NewSyscallError("bind", err)
	}
	r.reserved = append(r.reserved, fd)
	return nil
}

func (r *linuxRaw) close() {
	r.conn.Close()
	for _, fd := range r.reserved {
		unix.Close(fd)
	}
	r.reserved = nil
}
