package realcluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const cgroupFS = "/sys/fs/cgroup"

// cgroupHierarchies returns the mounted hierarchies (cgroup v1 controllers and the unified
// cgroup2), e.g. /sys/fs/cgroup/cpu.
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir(cgroupFS)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", cgroupFS, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(cgroupFS, e.Name()))
		}
	}
	return out, nil
}

// createCgroup makes kubelet's cgroupRoot in every hierarchy (cpuset's with its parent's
// CPUs and memory nodes, without which nothing can join it).
func createCgroup(root string) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		dir := filepath.Join(h, root)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("making cgroup %s: %w", dir, err)
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return fmt.Errorf("reading %s: %w", filepath.Join(h, f), err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("writing %s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// removeCgroup removes root and everything below it from every hierarchy, deepest first,
// retrying while the kernel still counts the killed processes in them.
func removeCgroup(root string, timeout time.Duration) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for _, h := range hierarchies {
		top := filepath.Join(h, root)
		for {
			err := removeTree(top)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("removing cgroup %s: %w", top, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

func removeTree(top string) error {
	var dirs []string
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rmdir %s: %w", d, err)
		}
	}
	return nil
}

// CgroupsLeft returns the cgroups (in any hierarchy) of this run's nodes that still exist.
func CgroupsLeft() ([]string, error) {
	return matchCgroups("realcluster-" + hostPID() + "-")
}

func matchCgroups(prefix string) ([]string, error) {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, h := range hierarchies {
		entries, err := os.ReadDir(h)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", h, err)
		}
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				out = append(out, filepath.Join(h, e.Name()))
			}
		}
	}
	return out, nil
}

// sweepStaleCgroups removes the cgroups of earlier runs whose test process is gone (their
// names carry its PID), e.g. after a run was killed.
func sweepStaleCgroups() {
	dirs, err := matchCgroups("realcluster-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "realcluster: sweeping stale cgroups: %v\n", err)
		return
	}
	for _, dir := range dirs {
		pid := strings.SplitN(strings.TrimPrefix(filepath.Base(dir), "realcluster-"), "-", 2)[0]
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue
		}
		if err := removeTree(dir); err != nil {
			fmt.Fprintf(os.Stderr, "realcluster: removing stale cgroup %s: %v\n", dir, err)
		}
	}
}

// keptMarker marks a cluster folder kept on purpose (failed test, KeepEnv): no sweep
// removes it.
const keptMarker = "KEPT"

// sweepStaleFolders removes the cluster and image folders (realcluster-<PID>-...) of
// earlier runs whose test process is gone, unless they were kept on purpose.
func sweepStaleFolders() {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), "realcluster-*-*"))
	if err != nil {
		return
	}
	for _, dir := range dirs {
		pid := strings.SplitN(strings.TrimPrefix(filepath.Base(dir), "realcluster-"), "-", 2)[0]
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, keptMarker)); err == nil {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "realcluster: removing stale folder %s: %v\n", dir, err)
		}
	}
}
