#!/usr/bin/env bash
# The cross toolchain for the arm64 host binary: zig as the C compiler and
# linker for aarch64-unknown-linux-musl (ring's and psm's C and assembly),
# driven by cargo-zigbuild. Both come prebuilt from PyPI, pinned and cached
# by version (a Python venv each under the cache): the `ziglang` wheel, and
# the `cargo-zigbuild` wheel (the same release as the crate, its binary built
# by its project, so a cold machine does not compile it).
# Debian's cross gcc would do as well, but it brings glibc headers to a musl
# build; zig carries musl's own headers for every target.
#
# stdout carries only `export PATH=…` (eval it); progress goes to stderr.
#
#   eval "$(scripts/cross-toolchain.sh)"   # cargo zigbuild --target aarch64-unknown-linux-musl
set -euo pipefail

zig_version=0.15.2
zigbuild_version=0.24.1

tool="$(dirname "${BASH_SOURCE[0]}")/cached-tool.sh"
venv="$(bash "$tool" pypi ziglang "$zig_version")"
# cargo-zigbuild calls `zig`, or `python3 -m ziglang` when there is none.
mkdir -p "$venv/shim"
printf '#!/bin/sh\nexec "%s" -m ziglang "$@"\n' "$venv/bin/python3" >"$venv/shim/zig"
chmod +x "$venv/shim/zig"

zigbuild="$(bash "$tool" pypi cargo-zigbuild "$zigbuild_version")"
# Only the program on PATH, not the venv's python.
mkdir -p "$zigbuild/shim"
ln -sf "$zigbuild/bin/cargo-zigbuild" "$zigbuild/shim/cargo-zigbuild"
printf 'export PATH=%q:%q:"$PATH"\n' "$venv/shim" "$zigbuild/shim"
