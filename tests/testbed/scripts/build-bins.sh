#!/usr/bin/env bash
# Build the test bed's server binaries (kube-apiserver, etcd) and kubectl (the
# documentation's commands run with it) from the Go module proxy and cache them
# outside git, keyed by version.
#
# Usage:
#   eval "$(tests/testbed/scripts/build-bins.sh)"     # exports TESTBED_KUBE_APISERVER / TESTBED_ETCD / TESTBED_KUBECTL
#   tests/testbed/scripts/build-bins.sh --regen       # regenerate the wrapper go.mod/go.sum, then build
#
# Stdout carries only `export ...` lines; progress goes to stderr.
#
# Why wrapper modules: `go install k8s.io/kubernetes/cmd/kube-apiserver@v1.x`
# is refused because the kubernetes go.mod uses `replace` directives (staging
# modules at v0.0.0 => ./staging/...), and etcd's server module does the same.
# A small main module that requires the upstream module and replaces every
# staging module with its published v0.X.Y twin builds the same binary.
# The wrapper go.mod/go.sum are committed under tests/testbed/go/ so builds
# are reproducible (go.sum pins every module hash); `--regen` rewrites them.
#
# Environment:
#   TESTBED_CACHE   cache root (default: $HOME/.cache/service-provider-host/testbed)
#   K8S_VERSION     default v1.37.2 (keep in line with k8s-openapi's `latest` feature)
#   ETCD_VERSION    default v3.6.16
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
# `go mod init` would write the local toolchain's exact version (e.g.
# 1.26.8) and make older 1.26.x toolchains download a newer one; `go get`
# raises this when a dependency needs more.
GO_DIRECTIVE="${GO_DIRECTIVE:-1.26.0}"
CACHE="${TESTBED_CACHE:-${HOME}/.cache/service-provider-host/testbed}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KUBE_WRAPPER="${HERE}/go/kube-apiserver"
ETCD_WRAPPER="${HERE}/go/etcd"
KUBE_OUT="${CACHE}/k8s-${K8S_VERSION}"
ETCD_OUT="${CACHE}/etcd-${ETCD_VERSION}"

REGEN=0
for a in "$@"; do
  case "$a" in
    --regen) REGEN=1 ;;
    -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "build-bins.sh: unknown argument: $a" >&2; exit 2 ;;
  esac
done

# The wrappers are standalone modules; never let a go.work elsewhere interfere.
export GOWORK=off
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

log() { echo "build-bins [${SECONDS}s]: $*" >&2; }

command -v go >/dev/null || { log "go is not on PATH (Go >= 1.26 is required)"; exit 1; }

# One run at a time: a second waits, then finds what the first built (CI
# starts these builds in the background while `task test` may ask too).
mkdir -p "$CACHE"
exec {lock_fd}>"$CACHE/.build-bins.lock"
flock "$lock_fd"

# Reads one field of `go mod download -json` without python/jq.
mod_field() { # module@version field
  go mod download -json "$1" | sed -n "s/^[[:space:]]*\"$2\": \"\(.*\)\",\{0,1\}$/\1/p"
}

wrapper_version() { # dir module -> version required in its go.mod ("" if none)
  [ -f "$1/go.mod" ] || return 0
  sed -n "s#^[[:space:]]*\(require[[:space:]]\{1,\}\)\{0,1\}$2[[:space:]]\{1,\}\(v[^[:space:]]*\).*#\2#p" "$1/go.mod" | head -n1
}

gen_kube_wrapper() {
  log "generating kube-apiserver wrapper module for ${K8S_VERSION}"
  local up staging gd
  rm -f "${KUBE_WRAPPER}/go.mod" "${KUBE_WRAPPER}/go.sum"
  mkdir -p "${KUBE_WRAPPER}"
  (
    cd "${KUBE_WRAPPER}"
    go mod init local/testbed/kube-apiserver >/dev/null 2>&1
    go mod edit -go="${GO_DIRECTIVE}"
    up="$(mod_field "k8s.io/kubernetes@${K8S_VERSION}" GoMod)"
    staging="v0.${K8S_VERSION#v1.}"
    # Every module upstream replaces with ./staging/... gets its published twin.
    for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/.*#\1#p' "$up"); do
      go mod edit -replace="$m=$m@$staging"
    done
    # Same runtime defaults as upstream's build.
    gd="$(sed -n 's/^godebug[[:space:]]\{1,\}\(default=go[0-9.]*\)[[:space:]]*$/\1/p' "$up")"
    [ -z "$gd" ] || go mod edit -godebug="$gd"
    go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@${K8S_VERSION}" >&2
    go get -tool "k8s.io/kubernetes/cmd/kubectl@${K8S_VERSION}" >&2
  )
}

gen_etcd_wrapper() {
  log "generating etcd wrapper module for ${ETCD_VERSION}"
  rm -f "${ETCD_WRAPPER}/go.mod" "${ETCD_WRAPPER}/go.sum"
  mkdir -p "${ETCD_WRAPPER}"
  (
    cd "${ETCD_WRAPPER}"
    go mod init local/testbed/etcd >/dev/null 2>&1
    go mod edit -go="${GO_DIRECTIVE}"
    go get -tool "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" >&2
  )
}

# Version ldflags, as upstream's hack/lib/version.sh sets them, so that
# /version reports the real version instead of v0.0.0-master.
version_ldflags() {
  local minor kv ld="-s -w"
  minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  for kv in "gitVersion=${K8S_VERSION}" "gitMajor=1" "gitMinor=${minor}" "gitTreeState=clean" \
            "gitCommit=0000000000000000000000000000000000000000" "buildDate=1970-01-01T00:00:00Z"; do
    ld="$ld -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  echo "$ld"
}

build_kube() {
  local bin="${KUBE_OUT}/kube-apiserver" minor ld kv
  if [ -x "$bin" ] && [ "$REGEN" = 0 ]; then log "cache hit: $bin"; return 0; fi
  if [ "$REGEN" = 1 ] || [ "$(wrapper_version "$KUBE_WRAPPER" k8s.io/kubernetes)" != "$K8S_VERSION" ]; then
    gen_kube_wrapper
  fi
  ld="$(version_ldflags)"
  mkdir -p "$KUBE_OUT"
  log "building kube-apiserver ${K8S_VERSION} (cold: many minutes on 2 cores)"
  local started=$SECONDS
  # No DWARF from the compiler (see wrapper.sh): -s -w drops it anyway.
  (cd "$KUBE_WRAPPER" && CGO_ENABLED=0 go build -trimpath -gcflags=all=-dwarf=false -ldflags "$ld" -o "${bin}.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
  mv -f "${bin}.tmp" "$bin"   # atomic: an interrupted build never leaves a half binary
  log "built kube-apiserver ${K8S_VERSION} in $((SECONDS - started))s"
}

build_etcd() {
  local bin="${ETCD_OUT}/etcd"
  if [ -x "$bin" ] && [ "$REGEN" = 0 ]; then log "cache hit: $bin"; return 0; fi
  if [ "$REGEN" = 1 ] || [ "$(wrapper_version "$ETCD_WRAPPER" go.etcd.io/etcd/server/v3)" != "$ETCD_VERSION" ]; then
    gen_etcd_wrapper
  fi
  mkdir -p "$ETCD_OUT"
  log "building etcd ${ETCD_VERSION}"
  local started=$SECONDS
  (cd "$ETCD_WRAPPER" && CGO_ENABLED=0 go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "${bin}.tmp" go.etcd.io/etcd/server/v3)
  mv -f "${bin}.tmp" "$bin"
  log "built etcd ${ETCD_VERSION} in $((SECONDS - started))s"
}

# kubectl from the same wrapper module: the same version, and the build cache
# kube-apiserver filled.
build_kubectl() {
  local bin="${KUBE_OUT}/kubectl"
  if [ -x "$bin" ] && [ "$REGEN" = 0 ]; then log "cache hit: $bin"; return 0; fi
  log "building kubectl ${K8S_VERSION}"
  local started=$SECONDS
  (cd "$KUBE_WRAPPER" && CGO_ENABLED=0 go build -trimpath -gcflags=all=-dwarf=false -ldflags "$(version_ldflags)" -o "${bin}.tmp" k8s.io/kubernetes/cmd/kubectl)
  mv -f "${bin}.tmp" "$bin"
  log "built kubectl ${K8S_VERSION} in $((SECONDS - started))s"
}

build_etcd
build_kube
build_kubectl

"${ETCD_OUT}/etcd" --version >&2
"${KUBE_OUT}/kube-apiserver" --version >&2
echo "export TESTBED_KUBE_APISERVER=${KUBE_OUT}/kube-apiserver"
echo "export TESTBED_ETCD=${ETCD_OUT}/etcd"
echo "export TESTBED_KUBECTL=${KUBE_OUT}/kubectl"
