#!/usr/bin/env bash
# `reuse lint`: every file has copyright and licence information (REUSE.toml)
# and every licence used is in LICENSES/. The REUSE tool comes from PyPI,
# pinned, in a venv cached by version.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv="$(bash scripts/cached-tool.sh pypi reuse 6.2.0)"
"$venv/bin/reuse" lint --quiet || { "$venv/bin/reuse" lint | tail -20 >&2; exit 1; }
