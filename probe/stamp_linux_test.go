//go:build linux

package probe

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netprober/prober/probe/probetest"
)

// stampCmsg is one control message of level, typ and a timespec at.
func stampCmsg(level, typ int32, at time.Time) []byte {
	b := make([]byte, unix.CmsgSpace(timespecLen))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(timespecLen))
	ts := unix.NsecToTimespec(at.UnixNano())
	*(*unix.Timespec)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = ts
	return b
}

// TestArrival: the kernel's receive stamp is the arrival, found past
// another control message; none, a foreign one, a stamp from the future
// or one the clock stepped away from, and cut or lying headers give
// now.
func TestArrival(t *testing.T) {
	now := time.Now()
	stamp := now.Add(-3 * time.Millisecond)
	other := stampCmsg(unix.IPPROTO_IP, unix.IP_TTL, stamp)
	good := stampCmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, stamp)
	lying := stampCmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, stamp)
	binary.NativeEndian.PutUint64(lying, 1<<40) // Len far past the buffer (64-bit header)
	for _, c := range []struct {
		name string
		oob  []byte
		want time.Time
	}{
		{"stamp", good, stamp},
		{"after another message", append(append([]byte{}, other...), good...), stamp},
		{"none", nil, now},
		{"another message only", other, now},
		{"from the future", stampCmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, now.Add(time.Second)), now},
		{"clock stepped", stampCmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, now.Add(-time.Hour)), now},
		{"cut", good[:unix.CmsgLen(0)+4], now},
		{"header too long", lying, now},
	} {
		if got := arrival(c.oob, now); !got.Equal(c.want) {
			t.Errorf("%s: arrival %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRecvKernelStamp: a packet read late is stamped when it arrived,
// each family: the kernel's receive time, not the reader's. The kernel
// turns receive stamps on for the whole machine from a work queue after
// the first socket asks, and stamps a packet that arrived before that at
// its read: so a few tries, each its own SYN, the first stamped one judged.
func TestRecvKernelStamp(t *testing.T) {
	for _, lo := range []netip.Addr{loopback, loopback6} {
		ns := probetest.NewNS(t, "stamp")
		const base = 61010
		var r *linuxRaw
		if err := ns.Do(func() (err error) {
			r, err = openTCPRaw(lo, base, 1)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		enc := newSYNEncoder()
		var d time.Duration
		for try := range 5 {
			b, err := enc.encode(synPacket{src: lo, dst: lo, sport: 1, dport: base, seq: uint32(try + 1), ttl: 64})
			if err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			if err := r.send(b, lo); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			_, at, err := r.recv(make([]byte, 1500))
			if err != nil {
				t.Fatal(err)
			}
			if d = at.Sub(sent); d >= 0 && d <= 50*time.Millisecond {
				break
			}
		}
		r.close()
		if d < 0 || d > 50*time.Millisecond {
			t.Errorf("%s: stamped %v after the send, read 100ms after it, 5 tries: want the arrival's time", lo, d)
		}
	}
}
