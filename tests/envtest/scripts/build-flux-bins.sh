#!/usr/bin/env bash
# Build the binaries of the real Flux chain (source-controller, helm-controller
# and an OCI registry with htpasswd authentication), and cosign (signs plugin
# artifacts in the registry tests), from the Go module proxy and cache them
# outside git, keyed by version.
#
# Usage:
#   eval "$(tests/envtest/scripts/build-flux-bins.sh)"  # exports ENVTEST_SOURCE_CONTROLLER,
#                                                     #   ENVTEST_HELM_CONTROLLER, ENVTEST_REGISTRY,
#                                                     #   ENVTEST_COSIGN
#   tests/envtest/scripts/build-flux-bins.sh --regen    # regenerate the wrapper go.mod/go.sum, then build
#
# Stdout carries only `export ...` lines; progress goes to stderr.
#
# Why wrapper modules: both Flux controllers have `replace` directives in
# their go.mod, so `go install pkg@version` refuses them. A small main module
# with a `tool` line and upstream's module-to-module replaces (local `./api`
# replaces are dropped: the published api modules are used) builds the same
# binary. The registry has no replaces but gets a wrapper too, so that every
# build is pinned by a committed go.sum. `--regen` rewrites the wrappers; a
# wrapper whose version differs from the requested one is regenerated.
#
# The kro chart needs no binary: the Rust harness (src/real_flux.rs) packages
# it from the kro Go module and pushes it with a few OCI distribution calls.
#
# Environment:
#   ENVTEST_CACHE             cache root (default: $HOME/.cache/service-provider-host/envtest)
#   FLUX_SOURCE_VERSION       source-controller, default v1.9.2 (one Flux release with ...
#   FLUX_HELM_VERSION         helm-controller, default v1.6.2    ... this one)
#   REGISTRY_VERSION          github.com/distribution/distribution/v3, default v3.1.2
#   COSIGN_VERSION            github.com/sigstore/cosign/v3, default v3.1.3
set -euo pipefail

FLUX_SOURCE_VERSION="${FLUX_SOURCE_VERSION:-v1.9.2}"
FLUX_HELM_VERSION="${FLUX_HELM_VERSION:-v1.6.2}"
REGISTRY_VERSION="${REGISTRY_VERSION:-v3.1.2}"
COSIGN_VERSION="${COSIGN_VERSION:-v3.1.3}"
GO_DIRECTIVE="${GO_DIRECTIVE:-1.26.0}" # see build-bins.sh
CACHE="${ENVTEST_CACHE:-${HOME}/.cache/service-provider-host/envtest}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

SOURCE_MODULE=github.com/fluxcd/source-controller
HELM_MODULE=github.com/fluxcd/helm-controller
REGISTRY_MODULE=github.com/distribution/distribution/v3
COSIGN_MODULE=github.com/sigstore/cosign/v3

REGEN=0
for a in "$@"; do
  case "$a" in
    --regen) REGEN=1 ;;
    -h|--help) sed -n '2,28p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "build-flux-bins.sh: unknown argument: $a" >&2; exit 2 ;;
  esac
done

export GOWORK=off
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

log() { echo "build-flux-bins [${SECONDS}s]: $*" >&2; }

command -v go >/dev/null || { log "go is not on PATH (Go >= 1.26 is required)"; exit 1; }

mod_field() { # module@version field
  go mod download -json "$1" | sed -n "s/^[[:space:]]*\"$2\": \"\(.*\)\",\{0,1\}$/\1/p"
}

wrapper_version() { # dir module -> version required in its go.mod ("" if none)
  [ -f "$1/go.mod" ] || return 0
  sed -n "s#^[[:space:]]*\(require[[:space:]]\{1,\}\)\{0,1\}$2[[:space:]]\{1,\}\(v[^[:space:]]*\).*#\2#p" "$1/go.mod" | head -n1
}

# Prints upstream's replaces whose target is a published module version, as
# `go mod edit -replace` arguments (old[@v]=new@v). Replaces pointing at local
# directories (`=> ./api`) are skipped.
module_replaces() { # path of an upstream go.mod
  sed -n 's#^[[:space:]]*\(replace[[:space:]]\{1,\}\)\{0,1\}\([^[:space:]()]\{1,\}\)\([[:space:]]\{1,\}\(v[^[:space:]]*\)\)\{0,1\}[[:space:]]\{1,\}=>[[:space:]]\{1,\}\([^.[:space:]][^[:space:]]*\)[[:space:]]\{1,\}\(v[^[:space:]]*\)[[:space:]]*$#\2@\4=\5@\6#p' "$1" |
    sed 's#@=#=#'
}

gen_wrapper() { # name module version package
  local name="$1" module="$2" version="$3" package="$4" dir="${HERE}/go/$1" up r gd
  log "generating ${name} wrapper module for ${module}@${version}"
  rm -f "${dir}/go.mod" "${dir}/go.sum"
  mkdir -p "${dir}"
  (
    cd "${dir}"
    go mod init "local/envtest/${name}" >/dev/null 2>&1
    go mod edit -go="${GO_DIRECTIVE}"
    up="$(mod_field "${module}@${version}" GoMod)"
    for r in $(module_replaces "$up"); do
      log "  replace ${r}"
      go mod edit -replace="$r"
    done
    gd="$(sed -n 's/^godebug[[:space:]]\{1,\}\(default=go[0-9.]*\)[[:space:]]*$/\1/p' "$up")"
    [ -z "$gd" ] || go mod edit -godebug="$gd"
    go get -tool "${package}@${version}" >&2
  )
}

build() { # name module version package binary-name
  local name="$1" module="$2" version="$3" package="$4" out="${CACHE}/$1-$3" bin
  bin="${out}/$5"
  if [ -x "$bin" ] && [ "$REGEN" = 0 ]; then log "cache hit: $bin"; return 0; fi
  if [ "$REGEN" = 1 ] || [ "$(wrapper_version "${HERE}/go/${name}" "$module")" != "$version" ]; then
    gen_wrapper "$name" "$module" "$version" "$package"
  fi
  mkdir -p "$out"
  log "building ${name} ${version} (cold: minutes on 2 cores)"
  (cd "${HERE}/go/${name}" && CGO_ENABLED=0 go build -trimpath -ldflags "${LDFLAGS:--s -w}" -o "${bin}.tmp" "$package")
  mv -f "${bin}.tmp" "$bin" # atomic: an interrupted build never leaves a half binary
}

# The registry prints its version from an ldflag variable.
LDFLAGS="-s -w -X ${REGISTRY_MODULE}/version.version=${REGISTRY_VERSION}" \
  build registry "$REGISTRY_MODULE" "$REGISTRY_VERSION" "${REGISTRY_MODULE}/cmd/registry" registry
build source-controller "$SOURCE_MODULE" "$FLUX_SOURCE_VERSION" "$SOURCE_MODULE" source-controller
build helm-controller "$HELM_MODULE" "$FLUX_HELM_VERSION" "$HELM_MODULE" helm-controller
build cosign "$COSIGN_MODULE" "$COSIGN_VERSION" "${COSIGN_MODULE}/cmd/cosign" cosign

"${CACHE}/registry-${REGISTRY_VERSION}/registry" --version >&2
echo "export ENVTEST_SOURCE_CONTROLLER=${CACHE}/source-controller-${FLUX_SOURCE_VERSION}/source-controller"
echo "export ENVTEST_HELM_CONTROLLER=${CACHE}/helm-controller-${FLUX_HELM_VERSION}/helm-controller"
echo "export ENVTEST_REGISTRY=${CACHE}/registry-${REGISTRY_VERSION}/registry"
echo "export ENVTEST_COSIGN=${CACHE}/cosign-${COSIGN_VERSION}/cosign"
