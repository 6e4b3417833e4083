// Package install is the end-to-end test of kubelb installed as users install it: on two
// real clusters (e2e/realcluster), from images and charts pushed to a real registry, by
// running the shell blocks of docs/quickstart.md in order (TestInstallQuickStart).
package install
