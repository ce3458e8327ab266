package lab

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrPrivilege is what NeedNetAdmin wraps when the process may not build
// a lab.
var ErrPrivilege = errors.New("the lab needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN, to create network namespaces)")

// Linux capability numbers (linux/capability.h).
const (
	capNetAdmin = 12
	capSysAdmin = 21
)

// NeedNetAdmin returns ErrPrivilege unless the process holds CAP_NET_ADMIN
// and CAP_SYS_ADMIN (setns and the /run/netns bind mounts need the latter).
func NeedNetAdmin() error {
	eff, err := effectiveCaps()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPrivilege, err)
	}
	if eff&(1<<capNetAdmin) == 0 || eff&(1<<capSysAdmin) == 0 {
		return ErrPrivilege
	}
	return nil
}

func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff in /proc/self/status")
}
