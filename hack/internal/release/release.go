// Package release holds what the release tools under hack/ share: the
// SemVer version a build's `git describe` version is published as, in
// the chart (make chart) and the krew manifest (make image).
package release

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// SemVer is the SemVer version for the build's version: the build's
// itself when it is SemVer (a tag, "v" dropped; `git describe` past a
// tag, v1.2.0-3-gabc1234, is a pre-release of it), else a pre-release of
// base named by it (a bare commit, 0.1.0-8fdabc8), which sorts before
// base's release.
func SemVer(build, base string) (semver.Version, error) {
	if v, err := semver.StrictNewVersion(strings.TrimPrefix(build, "v")); err == nil {
		return *v, nil
	}
	b, err := semver.StrictNewVersion(base)
	if err != nil {
		return semver.Version{}, fmt.Errorf("the base version %q is not SemVer: %w", base, err)
	}
	pre := preRelease(build)
	if pre == "" {
		return semver.Version{}, fmt.Errorf("version %q: nothing of it can name a SemVer pre-release", build)
	}
	v, err := b.SetPrerelease(pre)
	if err != nil {
		// A commit of digits only with a leading zero is no SemVer
		// identifier; git's "g" prefix makes it one.
		if v, err = b.SetPrerelease("g" + pre); err != nil {
			return semver.Version{}, fmt.Errorf("version %q: %w", build, err)
		}
	}
	return v, nil
}

// preRelease keeps what a SemVer pre-release may hold of s: every other
// byte becomes "-", and empty dot-separated identifiers are dropped.
func preRelease(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '.') {
			b[i] = '-'
		}
	}
	var ids []string
	for id := range strings.SplitSeq(string(b), ".") {
		if id != "" {
			ids = append(ids, id)
		}
	}
	return strings.Join(ids, ".")
}
