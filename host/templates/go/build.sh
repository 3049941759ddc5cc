#!/bin/sh
# Builds __NAME__.wasm: Go compiles a WASI reactor (a core module whose
# exports the host calls), and the host's CLI makes it a component.
set -eu
cd "$(dirname "$0")"
# -buildmode=c-shared: no main to run, exports only; -checklinkname=0: the
# SDK's runtime package links to runtime.sbrk; -trimpath: the same bytes
# (and digest) on every machine.
GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared -ldflags=-checklinkname=0 -o __NAME__.core.wasm .
service-provider-host plugin componentize __NAME__.core.wasm __NAME__.wasm
rm -f __NAME__.core.wasm
