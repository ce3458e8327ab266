//go:build linux

package probe

import (
	"encoding/binary"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxStampLag is how far before the reader's own clock a kernel receive
// timestamp may be and still be taken: a stamp later than now, or older
// than this (the clock stepped), is not the packet's.
const maxStampLag = 10 * time.Second

// arrival is the packet's kernel receive time from its control messages
// (SCM_TIMESTAMPNS), or now when they hold none that fits. The cmsg
// headers are walked by hand: unix.ParseSocketControlMessage allocates.
// The kernel stamps a packet that came in before machine-wide stamping
// was on (it comes on from a work queue) at its read: late, once, at start.
func arrival(oob []byte, now time.Time) time.Time {
	hdr := unix.CmsgLen(0)
	for len(oob) >= hdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hdr || l > len(oob) {
			break
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && l >= unix.CmsgLen(timespecLen) {
			at := time.Unix(timespecAt(oob[hdr:]))
			if lag := now.Sub(at); lag >= 0 && lag <= maxStampLag {
				return at
			}
			break
		}
		oob = oob[min(unix.CmsgSpace(l-hdr), len(oob)):]
	}
	return now
}

// timespecLen is a native struct timespec's size: two longs.
const timespecLen = int(unsafe.Sizeof(unix.Timespec{}))

// timespecAt decodes a native struct timespec.
func timespecAt(b []byte) (sec, nsec int64) {
	if timespecLen == 16 {
		return int64(binary.NativeEndian.Uint64(b)), int64(binary.NativeEndian.Uint64(b[8:]))
	}
	return int64(int32(binary.NativeEndian.Uint32(b))), int64(int32(binary.NativeEndian.Uint32(b[4:])))
}
