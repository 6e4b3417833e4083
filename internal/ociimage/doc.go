// Package ociimage builds OCI container images without a container daemon, from files on
// disk: reproducible layers (sorted tar entries, fixed timestamps, owners and modes, no host
// metadata), an image config (entrypoint, user, env, OCI labels), a multi-platform index, and
// an SPDX 2.3 SBOM per image attached as an OCI 1.1 artifact whose subject is the image's
// manifest. It writes OCI image layouts (a directory, and a tarball `ctr images import`
// accepts) and pushes to a registry by reference.
//
// Same inputs give the same digests: every timestamp is Options.Created (from
// SOURCE_DATE_EPOCH or the commit time), and nothing of the host (owners, times, umask)
// reaches a layer. kubelb's own images (Binaries) are built by BuildProjectImage, which
// `make images` runs through hack/images; the images only tests use are built by
// PauseImage, BackendImage and EnvoyImage.
package ociimage
