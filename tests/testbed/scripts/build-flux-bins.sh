#!/usr/bin/env bash
# Build the binaries of the real Flux chain (source-controller, helm-controller,
# kustomize-controller and an OCI registry with htpasswd authentication), and
# cosign (signs plugin artifacts in the registry tests), from the Go module
# proxy and cache them outside git, keyed by version.
#
# Usage:
#   eval "$(tests/testbed/scripts/build-flux-bins.sh)"  # exports TESTBED_SOURCE_CONTROLLER,
#                                                     #   TESTBED_HELM_CONTROLLER, TESTBED_KUSTOMIZE_CONTROLLER,
#                                                     #   TESTBED_REGISTRY, TESTBED_COSIGN
#   tests/testbed/scripts/build-flux-bins.sh --regen    # regenerate the wrapper go.mod/go.sum, then build
#
# Stdout carries only `export ...` lines; progress goes to stderr.
#
# Built through wrapper modules (see wrapper.sh): the Flux controllers have
# `replace` directives, so `go install pkg@version` refuses them.
#
# The kro chart needs no binary: the Rust harness (src/real_flux.rs) packages
# it from the kro Go module and pushes it with a few OCI distribution calls.
#
# Environment:
#   TESTBED_CACHE             cache root (default: $HOME/.cache/service-provider-host/testbed)
#   FLUX_SOURCE_VERSION       source-controller, default v1.9.2 (one Flux release with ...
#   FLUX_HELM_VERSION         helm-controller, default v1.6.2    ... this one)
#   FLUX_KUSTOMIZE_VERSION    kustomize-controller, default v1.9.3 (Flux v2.9.2, the nearest
#                             release the proxy serves)
#   REGISTRY_VERSION          github.com/distribution/distribution/v3, default v3.1.2
#   COSIGN_VERSION            github.com/sigstore/cosign/v3, default v3.1.3
set -euo pipefail

FLUX_SOURCE_VERSION="${FLUX_SOURCE_VERSION:-v1.9.2}"
FLUX_HELM_VERSION="${FLUX_HELM_VERSION:-v1.6.2}"
FLUX_KUSTOMIZE_VERSION="${FLUX_KUSTOMIZE_VERSION:-v1.9.3}"
REGISTRY_VERSION="${REGISTRY_VERSION:-v3.1.2}"
COSIGN_VERSION="${COSIGN_VERSION:-v3.1.3}"
GO_DIRECTIVE="${GO_DIRECTIVE:-1.26.0}" # see build-bins.sh
CACHE="${TESTBED_CACHE:-${HOME}/.cache/service-provider-host/testbed}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

SOURCE_MODULE=github.com/fluxcd/source-controller
HELM_MODULE=github.com/fluxcd/helm-controller
KUSTOMIZE_MODULE=github.com/fluxcd/kustomize-controller
REGISTRY_MODULE=github.com/distribution/distribution/v3
COSIGN_MODULE=github.com/sigstore/cosign/v3

REGEN=0
for a in "$@"; do
  case "$a" in
    --regen) REGEN=1 ;;
    -h|--help) sed -n '2,31p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "build-flux-bins.sh: unknown argument: $a" >&2; exit 2 ;;
  esac
done

NAME=build-flux-bins
# shellcheck source=wrapper.sh
source "${HERE}/scripts/wrapper.sh"

# The registry prints its version from an ldflag variable.
LDFLAGS="-s -w -X ${REGISTRY_MODULE}/version.version=${REGISTRY_VERSION}" \
  build registry "$REGISTRY_MODULE" "$REGISTRY_VERSION" "${REGISTRY_MODULE}/cmd/registry" registry
build source-controller "$SOURCE_MODULE" "$FLUX_SOURCE_VERSION" "$SOURCE_MODULE" source-controller
build helm-controller "$HELM_MODULE" "$FLUX_HELM_VERSION" "$HELM_MODULE" helm-controller
build kustomize-controller "$KUSTOMIZE_MODULE" "$FLUX_KUSTOMIZE_VERSION" "$KUSTOMIZE_MODULE" kustomize-controller
build cosign "$COSIGN_MODULE" "$COSIGN_VERSION" "${COSIGN_MODULE}/cmd/cosign" cosign

"${CACHE}/registry-${REGISTRY_VERSION}/registry" --version >&2
echo "export TESTBED_SOURCE_CONTROLLER=${CACHE}/source-controller-${FLUX_SOURCE_VERSION}/source-controller"
echo "export TESTBED_HELM_CONTROLLER=${CACHE}/helm-controller-${FLUX_HELM_VERSION}/helm-controller"
echo "export TESTBED_KUSTOMIZE_CONTROLLER=${CACHE}/kustomize-controller-${FLUX_KUSTOMIZE_VERSION}/kustomize-controller"
echo "export TESTBED_REGISTRY=${CACHE}/registry-${REGISTRY_VERSION}/registry"
echo "export TESTBED_COSIGN=${CACHE}/cosign-${COSIGN_VERSION}/cosign"
