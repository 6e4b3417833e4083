// Command images builds kubelb's container images (the manager, kubelb-manager, and the ccm,
// kubelb-ccm) for `make images`: it cross-compiles both binaries for every platform, packs
// them with internal/ociimage into reproducible multi-platform OCI images with an SPDX SBOM
// each, writes them as OCI layouts under -out, prints every image's digests and sizes, and
// with -push pushes them to -registry. Flags only: the logic is in internal/ociimage.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kubelb.dev/kubelb/internal/ociimage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "bin/images", "Directory of the OCI layouts (<image>/ and <image>.oci.tar) and the binaries (build/).")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "Comma-separated platforms to build.")
	registry := flag.String("registry", "ghcr.io/kubelb", "Registry and prefix of the images: <registry>/<image>:<tag>.")
	tag := flag.String("tag", "", "Tag of the images (required).")
	ldflags := flag.String("ldflags", "-s -w", "Go linker flags of the binaries (the Makefile's LDFLAGS).")
	version := flag.String("version", "", "org.opencontainers.image.version label.")
	revision := flag.String("revision", "", "org.opencontainers.image.revision label (the commit).")
	source := flag.String("source", "https://github.com/kubelb/kubelb", "org.opencontainers.image.source label.")
	licenses := flag.String("licenses", "Apache-2.0", "org.opencontainers.image.licenses label.")
	epoch := flag.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Every time in the images, in seconds since 1970 (SOURCE_DATE_EPOCH; the Makefile passes the commit time).")
	caBundle := flag.String("ca-bundle", ociimage.HostCABundle, "CA bundle copied to "+ociimage.CABundlePath+".")
	push := flag.Bool("push", false, "Push the images and their SBOMs to -registry after writing them.")
	plainHTTP := flag.Bool("plain-http", false, "Push over HTTP (a loopback, RFC 1918 or .local registry gets HTTP after HTTPS fails anyway).")
	flag.Parse()
	if *tag == "" {
		return fmt.Errorf("flag -tag is required")
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("flag -source-date-epoch %q: want seconds since 1970", *epoch)
	}
	var ps []ociimage.Platform
	for _, s := range strings.Split(*platforms, ",") {
		p, err := ociimage.ParsePlatform(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	meta := ociimage.Metadata{Version: *version, Revision: *revision, Source: *source, Licenses: *licenses, Created: time.Unix(secs, 0).UTC()}
	for _, b := range ociimage.Binaries {
		ref := strings.TrimSuffix(*registry, "/") + "/" + b.Image + ":" + *tag
		built, err := ociimage.BuildProjectImage(ctx, root, b, ps, *ldflags, filepath.Join(*out, "build"), *caBundle, meta)
		if err != nil {
			return err
		}
		if err := ociimage.WriteLayoutTar(filepath.Join(*out, b.Image), filepath.Join(*out, b.Image+".oci.tar"), built, ref, meta.Created); err != nil {
			return err
		}
		sum, err := ociimage.Summarize(built)
		if err != nil {
			return err
		}
		fmt.Printf("%s -> %s\n%s", ref, filepath.Join(*out, b.Image+".oci.tar"), sum)
		if *push {
			pushed, err := ociimage.Push(ctx, built, ref, *plainHTTP)
			if err != nil {
				return err
			}
			fmt.Printf("  pushed %s\n", pushed.Index)
			for _, s := range pushed.SBOMs {
				fmt.Printf("  pushed SBOM %s\n", s)
			}
		}
	}
	return nil
}
