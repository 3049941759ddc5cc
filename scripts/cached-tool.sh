#!/usr/bin/env bash
# A tool from a package registry, pinned, installed once into a directory
# cached by name and version under
# ${SPH_TOOLS_CACHE:-~/.cache/service-provider-host/tools}, then reused.
# Prints that directory; the tool's programs are in its bin/.
#
#   pypi   <package> <version>   a Python venv with the package (pip)
#   crates <crate> <version>     the crate's binaries (cargo install --locked)
#
#   dir="$(scripts/cached-tool.sh pypi reuse 6.2.0)"; "$dir/bin/reuse" lint
set -euo pipefail
usage="usage: cached-tool.sh pypi|crates <package> <version>"
registry="${1:?$usage}"
package="${2:?$usage}"
version="${3:?$usage}"
dir="${SPH_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/service-provider-host/tools}/$package-$version"
# One install at a time per tool and version; a second run waits for it.
mkdir -p "$(dirname "$dir")"
exec {lock_fd}>"$dir.lock"
flock "$lock_fd"
if [ ! -f "$dir/.installed" ]; then
  echo "cached-tool: installing $package $version from $registry" >&2
  rm -rf "$dir"
  case "$registry" in
    pypi)
      python3 -m venv "$dir" >&2
      "$dir/bin/pip" install -q "$package==$version" >&2
      ;;
    crates) cargo install --locked --quiet --version "$version" --root "$dir" "$package" >&2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  touch "$dir/.installed"
fi
echo "$dir"
