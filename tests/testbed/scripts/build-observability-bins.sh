#!/usr/bin/env bash
# Build promtool (checks and unit-tests Prometheus rules) and Jaeger (v2
# all-in-one: OTLP in, query API out) from the Go module proxy and cache
# them outside git, keyed by version.
#
# Usage:
#   eval "$(tests/testbed/scripts/build-observability-bins.sh)"  # exports TESTBED_PROMTOOL, TESTBED_JAEGER
#   tests/testbed/scripts/build-observability-bins.sh --regen    # regenerate the wrapper go.mod/go.sum, then build
#
# Stdout carries only `export ...` lines; progress goes to stderr. Cold:
# about 9 minutes on 2 cores (promtool 2.5, jaeger 6, module downloads
# included; measured next to a Rust build); then a cache hit. Sizes:
# promtool 54 MB, jaeger 85 MB. Built through wrapper modules (see
# wrapper.sh). promtool is built with `-tags=remove_all_sd` (no service
# discovery plugins: 88 MB and 5.5 minutes otherwise); only its rule
# commands are used. Jaeger needs no tags: its UI assets are not in the
# module, so the UI is a placeholder page (the query API is complete).
# `cmd/jaeger` is Jaeger v2 (OpenTelemetry collector, `--config`).
#
# Environment:
#   TESTBED_CACHE       cache root (default: $HOME/.cache/service-provider-host/testbed)
#   PROMETHEUS_VERSION  github.com/prometheus/prometheus, default v0.316.0 (Prometheus 3.16.0)
#   JAEGER_VERSION      github.com/jaegertracing/jaeger, default v1.75.0 (the approved one)
set -euo pipefail

PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
JAEGER_VERSION="${JAEGER_VERSION:-v1.75.0}"
GO_DIRECTIVE="${GO_DIRECTIVE:-1.26.0}" # see build-bins.sh
CACHE="${TESTBED_CACHE:-${HOME}/.cache/service-provider-host/testbed}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

PROMETHEUS_MODULE=github.com/prometheus/prometheus
JAEGER_MODULE=github.com/jaegertracing/jaeger

REGEN=0
for a in "$@"; do
  case "$a" in
    --regen) REGEN=1 ;;
    -h|--help) sed -n '2,23p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "build-observability-bins.sh: unknown argument: $a" >&2; exit 2 ;;
  esac
done

NAME=build-observability-bins
# shellcheck source=wrapper.sh
source "${HERE}/scripts/wrapper.sh"

# Both print their version from ldflag variables (`promtool --version`,
# `jaeger version`); Prometheus' release number is the module's VERSION file.
PROMTOOL_LDFLAGS="-s -w"
if [ "$REGEN" = 1 ] || [ ! -x "${CACHE}/promtool-${PROMETHEUS_VERSION}/promtool" ]; then
  PROMTOOL_LDFLAGS+=" -X github.com/prometheus/common/version.Version=$(cat "$(mod_field "${PROMETHEUS_MODULE}@${PROMETHEUS_VERSION}" Dir)/VERSION")"
fi
GOFLAGS="${GOFLAGS} -tags=remove_all_sd" LDFLAGS="$PROMTOOL_LDFLAGS" \
  build promtool "$PROMETHEUS_MODULE" "$PROMETHEUS_VERSION" "${PROMETHEUS_MODULE}/cmd/promtool" promtool
LDFLAGS="-s -w -X ${JAEGER_MODULE}/internal/version.latestVersion=${JAEGER_VERSION}" \
  build jaeger "$JAEGER_MODULE" "$JAEGER_VERSION" "${JAEGER_MODULE}/cmd/jaeger" jaeger

echo "export TESTBED_PROMTOOL=${CACHE}/promtool-${PROMETHEUS_VERSION}/promtool"
echo "export TESTBED_JAEGER=${CACHE}/jaeger-${JAEGER_VERSION}/jaeger"
