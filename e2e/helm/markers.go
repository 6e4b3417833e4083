package helm

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MarkerPermissions reads the +kubebuilder:rbac markers of the non-test Go files under dir
// (the permissions the controllers there declare they use) and expands them into
// permissions. A missing dir yields none.
func MarkerPermissions(dir string) ([]Permission, error) {
	var out []Permission
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && path == dir {
				return filepath.SkipAll
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			text := strings.TrimSpace(sc.Text())
			marker, ok := strings.CutPrefix(text, "// +kubebuilder:rbac:")
			if !ok {
				continue
			}
			ps, err := parseMarker(marker)
			if err != nil {
				return fmt.Errorf("%s:%d: %w", path, line, err)
			}
			out = append(out, ps...)
		}
		return sc.Err()
	})
	return out, err
}

// parseMarker expands groups=a;b,resources=x;y/status,verbs=get;list[,namespace=n][,resourceNames=r].
func parseMarker(m string) ([]Permission, error) {
	fields := map[string][]string{}
	for kv := range strings.SplitSeq(m, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("malformed rbac marker %q", m)
		}
		var vals []string
		for x := range strings.SplitSeq(v, ";") {
			vals = append(vals, strings.Trim(x, `"`))
		}
		fields[k] = vals
	}
	if len(fields["resources"]) == 0 || len(fields["verbs"]) == 0 {
		return nil, fmt.Errorf("rbac marker %q lacks resources or verbs", m)
	}
	groups := fields["groups"]
	if len(groups) == 0 {
		groups = []string{""}
	}
	ns := ""
	if n := fields["namespace"]; len(n) > 0 {
		ns = n[0]
	}
	names := fields["resourceNames"]
	if len(names) == 0 {
		names = []string{""}
	}
	var out []Permission
	for _, g := range groups {
		for _, p := range Permissions(g, fields["resources"], fields["verbs"], ns) {
			for _, n := range names {
				p.Name = n
				out = append(out, p)
			}
		}
	}
	return out, nil
}
