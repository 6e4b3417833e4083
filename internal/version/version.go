// Package version holds the build information stamped into the binaries by the Makefile.
package version

import (
	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// Set with -ldflags "-X kubelb.dev/kubelb/internal/version.gitVersion=..." at build time.
var (
	gitVersion = "v0.0.0-dev"
	gitCommit  = "unknown"
	buildDate  = "unknown"
)

// Edition of this kubelb build.
const Edition = "kubelb"

// Get returns the build information of the running binary.
func Get() kubelbv1alpha1.Version {
	return kubelbv1alpha1.Version{GitVersion: gitVersion, GitCommit: gitCommit, BuildDate: buildDate, Edition: Edition}
}
