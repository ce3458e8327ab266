package testbed

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netprober/prober/lab"
)

// Cgroups. The harness keeps everything it starts under one cgroup v2
// directory per cluster, so that on Close (or after a crash) whatever a
// daemon left behind (containerd's shims, the containers) is found and
// killed by membership: nothing is ever killed by name. On a cgroup v1
// (hybrid) machine that directory lives in the v2 hierarchy mounted beside
// the controllers, and kubelet's cgroupRoot is created in every v1
// controller; on a pure v2 machine both are the same tree.

const cgroupBase = "/sys/fs/cgroup"

// cgroupV2 reports whether a cgroup v2 hierarchy is mounted.
func cgroupV2() error {
	_, err := detectCgroups()
	return err
}

// cgroupLayout is where a cluster's cgroups go on this machine.
type cgroupLayout struct {
	unified string   // the cgroup v2 mount: /sys/fs/cgroup or /sys/fs/cgroup/unified
	v1      []string // mounted v1 hierarchies (empty on a pure v2 machine)
}

func detectCgroups() (cgroupLayout, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupBase, &st); err != nil {
		return cgroupLayout{}, fmt.Errorf("cgroups: %w", err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return cgroupLayout{unified: cgroupBase}, nil
	}
	l := cgroupLayout{}
	mounts, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return l, err
	}
	defer mounts.Close()
	sc := bufio.NewScanner(mounts)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// ... mount point (4), then "-", fstype, source, options.
		i := slices.Index(f, "-")
		if i < 0 || i+1 >= len(f) || !strings.HasPrefix(f[4], cgroupBase+"/") {
			continue
		}
		switch f[i+1] {
		case "cgroup2":
			l.unified = f[4]
		case "cgroup":
			l.v1 = append(l.v1, f[4])
		}
	}
	if l.unified == "" {
		return l, errors.New("cgroups: no cgroup v2 hierarchy mounted (the harness tracks its processes there): mount cgroup2 at /sys/fs/cgroup/unified")
	}
	return l, nil
}

// cgroupDir is the cluster's cgroup path below each hierarchy's root.
func cgroupDir(prefix string) string { return filepath.Join("prober-lab", prefix) }

// makeKubeletRoot creates rel (kubelet's cgroupRoot) in every hierarchy;
// cpuset needs its parents' cpus and mems before a child may hold tasks.
func (l cgroupLayout) makeKubeletRoot(rel string) error {
	for _, h := range append(slices.Clone(l.v1), l.unified) {
		parts := strings.Split(rel, "/")
		cur := h
		for _, part := range parts {
			parent := cur
			cur = filepath.Join(cur, part)
			if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("cgroup %s: %w", cur, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(parent, f))
				if err != nil {
					continue // not the cpuset hierarchy
				}
				if err := os.WriteFile(filepath.Join(cur, f), b, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %s: %w", cur, f, err)
				}
			}
		}
	}
	return nil
}

// killCgroup kills every process in the v2 cgroup dir and its
// descendants, and waits until it is empty.
func killCgroup(dir string, within time.Duration) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	deadline := time.Now().Add(within)
	for {
		pids, err := cgroupPids(dir)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: %d processes left after %v: %v", dir, len(pids), within, pids)
		}
		// cgroup.kill (Linux 5.14) kills the whole subtree at once, so a
		// forking process cannot outrun us; the loop is the fallback.
		if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0o644); err != nil {
			for _, pid := range pids {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cgroupTree lists dir and every cgroup below it, parents first; none
// when dir does not exist.
func cgroupTree(dir string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // gone meanwhile, or never made
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	return dirs, err
}

// cgroupPids lists the processes in dir and below.
func cgroupPids(dir string) ([]int, error) {
	dirs, err := cgroupTree(dir)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for f := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// removeCgroupTree removes dir and every cgroup below it, deepest first.
func removeCgroupTree(dir string) error {
	dirs, err := cgroupTree(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range slices.Backward(dirs) {
		// A cgroup stays busy for a moment after its last task died.
		var err error
		for range 100 {
			if err = os.Remove(d); !errors.Is(err, unix.EBUSY) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("cgroup %s: %w", d, err))
		}
	}
	// The shared parent goes too when no other cluster uses it.
	os.Remove(filepath.Dir(dir))
	return errors.Join(errs...)
}

// clusterOwner is a running cluster's record under lab.StateDir: the
// process that owns it (its pid and start time, which tell it from a
// later process with the same pid) and its directory. A cluster whose
// owner is gone is a leftover: StartCluster removes it.
type clusterOwner struct {
	Prefix string `json:"prefix"`
	PID    int    `json:"pid"`
	Start  string `json:"start"`
	Dir    string `json:"dir,omitempty"` // removed with it when the harness made it
}

func ownerPath(prefix string) string { return filepath.Join(lab.StateDir, prefix+".cluster.json") }

// procStart is a process's start time in clock ticks since boot (field 22
// of /proc/PID/stat), "" when there is no such process.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces: fields count from its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

func writeOwner(o clusterOwner) error {
	if err := os.MkdirAll(lab.StateDir, 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return os.WriteFile(ownerPath(o.Prefix), b, 0o644)
}

// sweepClusters removes the clusters whose owner process is gone.
func sweepClusters(l cgroupLayout, logf func(format string, args ...any)) {
	files, _ := filepath.Glob(filepath.Join(lab.StateDir, "*.cluster.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var o clusterOwner
		if json.Unmarshal(b, &o) != nil || o.Prefix == "" || procStart(o.PID) == o.Start {
			continue
		}
		err = errors.Join(removeCluster(o.Prefix, l), lab.Down(o.Prefix))
		if o.Dir != "" {
			err = errors.Join(err, os.RemoveAll(o.Dir))
		}
		if err == nil {
			err = os.Remove(f)
		}
		logf("removed the leftover cluster %s of process %d: %v", o.Prefix, o.PID, err)
	}
}
