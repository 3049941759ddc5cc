#!/usr/bin/env bash
# `reuse lint`: every file has copyright and licence information (REUSE.toml)
# and every licence used is in LICENSES/. The REUSE tool comes from PyPI,
# pinned, in a venv cached by version.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=6.2.0
venv="${SPH_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/service-provider-host/tools}/reuse-$version"
if [ ! -f "$venv/.installed" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q "reuse==$version" >&2
  touch "$venv/.installed"
fi
"$venv/bin/reuse" lint --quiet || { "$venv/bin/reuse" lint | tail -20 >&2; exit 1; }
