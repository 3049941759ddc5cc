#!/usr/bin/env bash
# Build openmcp-operator from the Go module proxy and cache it outside git,
# keyed by version: the tests that run openmcp for real start its `run`
# command (scheduler, AccessRequest and ServiceProvider controllers).
#
# Usage:
#   eval "$(tests/testbed/scripts/build-openmcp-bins.sh)"  # exports TESTBED_OPENMCP_OPERATOR
#   tests/testbed/scripts/build-openmcp-bins.sh --regen    # regenerate the wrapper go.mod/go.sum, then build
#
# Stdout carries only `export ...` lines; progress goes to stderr. Cold:
# about 5 minutes on 2 cores (controller-runtime, k8s.io); then a cache hit.
# Built through a wrapper module (see wrapper.sh): the operator's go.mod
# replaces ./api and ./lib, so `go install` refuses it; the published
# api and lib modules of the same version are used instead. Its CRDs are
# read at test time from the api module (src/crds.rs).
#
# Environment:
#   TESTBED_CACHE             cache root (default: $HOME/.cache/service-provider-host/testbed)
#   OPENMCP_OPERATOR_VERSION  default v1.3.0 (the newest the module proxy serves)
set -euo pipefail

OPENMCP_OPERATOR_VERSION="${OPENMCP_OPERATOR_VERSION:-v1.3.0}"
GO_DIRECTIVE="${GO_DIRECTIVE:-1.26.0}" # see build-bins.sh
CACHE="${TESTBED_CACHE:-${HOME}/.cache/service-provider-host/testbed}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE=github.com/openmcp-project/openmcp-operator

REGEN=0
for a in "$@"; do
  case "$a" in
    --regen) REGEN=1 ;;
    -h|--help) sed -n '2,19p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "build-openmcp-bins.sh: unknown argument: $a" >&2; exit 2 ;;
  esac
done

NAME=build-openmcp-bins
# shellcheck source=wrapper.sh
source "${HERE}/scripts/wrapper.sh"

build openmcp-operator "$MODULE" "$OPENMCP_OPERATOR_VERSION" "${MODULE}/cmd/openmcp-operator" openmcp-operator
echo "export TESTBED_OPENMCP_OPERATOR=${CACHE}/openmcp-operator-${OPENMCP_OPERATOR_VERSION}/openmcp-operator"
