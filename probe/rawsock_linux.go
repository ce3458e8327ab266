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
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// rawSocket is a raw socket for one IP protocol of one family, read
// through Go's netpoller so Close unblocks the reader.
type rawSocket interface {
	send(pkt []byte, dst netip.Addr) error
	// recv returns a whole IP packet, header included, and its arrival
	// time. On IPv6 the header is synthesized (putIPv6Header).
	recv(buf []byte) (int, time.Time, error)
	reserve(port uint16) error
	close()
}

var errClosed = net.ErrClosed

type linuxRaw struct {
	conn     *net.IPConn
	rc       syscall.RawConn
	src      netip.Addr
	src16    [16]byte
	proto    uint8 // the IP protocol, for the synthesized IPv6 header
	reserved []int // fds of sockets bound to reserve source ports

	// The reader's state. One goroutine calls recv, and a read function
	// made once allocates nothing per packet, where a closure over recv's
	// variables and recvfrom's source address took three allocations.
	rbuf   []byte
	rn     int
	rerr   error
	readFn func(fd uintptr) bool
	// from6 is the source address on IPv6, held here for the same
	// reason: unix.Recvmsg allocates a Sockaddr. msg, iov and oob are
	// recvmsg's, oob room for the kernel's receive timestamp.
	from6 unix.RawSockaddrInet6
	msg   unix.Msghdr
	iov   unix.Iovec
	oob   [64]byte
}

// openTCPRaw opens the tcp_syn socket. The kernel delivers it every TCP
// segment for our address; a classic BPF filter on the destination port
// makes it wake only for the reserved range, so a busy node's traffic
// costs nothing. The engine writes whole IP headers (IP_HDRINCL, or
// IPV6_HDRINCL since Linux 4.5), so the traceroute can set the TTL, the
// IPv4 ID and the IPv6 flow label of each packet.
func openTCPRaw(src netip.Addr, base, n uint16) (*linuxRaw, error) {
	network := "ip4:tcp"
	if !src.Is4() {
		network = "ip6:tcp"
	}
	return openRaw(network, "tcp_syn", src, tcpPortFilter(!src.Is4(), base, n), true)
}

// openRaw opens a raw socket for network ("ip4:tcp", "ip6:ipv6-icmp") on
// src with the classic BPF filter, and IP_HDRINCL or IPV6_HDRINCL when
// hdrincl; what names it in errors.
func openRaw(network, what string, src netip.Addr, filter []bpf.Instruction, hdrincl bool) (*linuxRaw, error) {
	prog, err := bpf.Assemble(filter)
	if err != nil {
		return nil, fmt.Errorf("%s bpf: %w", what, err)
	}
	pc, err := net.ListenPacket(network, src.String())
	if err != nil {
		return nil, privilegeError(what, err)
	}
	r := &linuxRaw{conn: pc.(*net.IPConn), src: src, src16: src.As16()}
	r.readFn = r.read
	if !src.Is4() {
		r.readFn = r.read6
		r.proto = unix.IPPROTO_TCP
		if network == "ip6:ipv6-icmp" {
			r.proto = unix.IPPROTO_ICMPV6
		}
	}
	if r.rc, err = r.conn.SyscallConn(); err == nil {
		err = r.setup(prog, hdrincl)
	}
	if err != nil {
		pc.Close()
		return nil, err
	}
	return r, nil
}

func (r *linuxRaw) setup(prog []bpf.RawInstruction, hdrincl bool) error {
	filter := make([]unix.SockFilter, len(prog))
	for i, ins := range prog {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	var serr error
	err := r.rc.Control(func(fd uintptr) {
		if hdrincl {
			level, opt, name := unix.IPPROTO_IP, unix.IP_HDRINCL, "IP_HDRINCL"
			if !r.src.Is4() {
				level, opt, name = unix.IPPROTO_IPV6, unix.IPV6_HDRINCL, "IPV6_HDRINCL"
			}
			if serr = unix.SetsockoptInt(int(fd), level, opt, 1); serr != nil {
				serr = os.NewSyscallError("setsockopt "+name, serr)
				return
			}
			// A sized probe goes out at its size whatever path MTU the
			// kernel learnt from an earlier one: each measures the path
			// as it is now, and a trace hears the router that says too
			// big at every TTL past it, not a local EMSGSIZE.
			level, opt, name = unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, "IP_MTU_DISCOVER"
			val := unix.IP_PMTUDISC_PROBE
			if !r.src.Is4() {
				level, opt, name, val = unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, "IPV6_MTU_DISCOVER", unix.IPV6_PMTUDISC_PROBE
			}
			if serr = unix.SetsockoptInt(int(fd), level, opt, val); serr != nil {
				serr = os.NewSyscallError("setsockopt "+name, serr)
				return
			}
		}
		fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
		if serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); serr != nil {
			serr = os.NewSyscallError("setsockopt SO_ATTACH_FILTER", serr)
			return
		}
		// The kernel stamps each packet as it arrives: a round trip
		// then leaves out how late a busy node woke the reader.
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); serr != nil {
			serr = os.NewSyscallError("setsockopt SO_TIMESTAMPNS", serr)
		}
	})
	return errors.Join(err, serr)
}

func (r *linuxRaw) send(pkt []byte, dst netip.Addr) error {
	_, err := r.conn.WriteToIP(pkt, &net.IPAddr{IP: dst.AsSlice()})
	return err
}

func (r *linuxRaw) recv(buf []byte) (int, time.Time, error) {
	if !r.src.Is4() && len(buf) <= ipv6HeaderLen {
		return 0, time.Now(), errors.New("raw receive: buffer too short for an IPv6 header")
	}
	r.rbuf = buf
	err := r.rc.Read(r.readFn)
	r.rbuf = nil
	at := time.Now()
	if err == nil && r.rerr == nil {
		at = arrival(r.oob[:r.msg.Controllen], at)
	}
	if err != nil {
		return 0, at, err
	}
	if r.rerr != nil {
		return 0, at, os.NewSyscallError("read", r.rerr)
	}
	if !r.src.Is4() {
		putIPv6Header(buf, r.rn, r.proto, &r.from6.Addr, &r.src16)
		return ipv6HeaderLen + r.rn, at, nil
	}
	return r.rn, at, nil
}

// read reads one packet into r.rbuf; false asks the poller to wait.
// A packet longer than the buffer is cut to it.
func (r *linuxRaw) read(fd uintptr) bool {
	return r.recvmsg(fd, r.rbuf, false)
}

// read6 reads one IPv6 payload into r.rbuf after room for the header,
// and its source address into r.from6.
func (r *linuxRaw) read6(fd uintptr) bool {
	return r.recvmsg(fd, r.rbuf[ipv6HeaderLen:], true)
}

// recvmsg by hand into b, with the source address when from, and the
// control messages into r.oob: unix.Recvmsg allocates.
func (r *linuxRaw) recvmsg(fd uintptr, b []byte, from bool) bool {
	r.iov.Base = &b[0]
	r.iov.SetLen(len(b))
	r.msg = unix.Msghdr{Iov: &r.iov, Control: &r.oob[0]}
	r.msg.SetIovlen(1)
	r.msg.SetControllen(len(r.oob))
	if from {
		r.msg.Name = (*byte)(unsafe.Pointer(&r.from6))
		r.msg.Namelen = unix.SizeofSockaddrInet6
	}
	n, _, errno := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&r.msg)), 0)
	r.rn, r.rerr = int(n), nil
	if errno != 0 {
		r.rn, r.rerr = 0, errno
		r.msg.Controllen = 0
	}
	return r.rerr != unix.EAGAIN
}

// reserve binds a TCP socket to (src, port) without listening: the kernel
// then never hands the port to another socket's connect or bind, and a
// SYN-ACK to it still meets no listener, so the kernel resets it.
func (r *linuxRaw) reserve(port uint16) error {
	family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: int(port), Addr: r.src16})
	if r.src.Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(port), Addr: r.src.As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	if err := unix.Bind(fd, sa); err != nil {
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
