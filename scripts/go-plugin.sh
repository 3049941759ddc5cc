#!/usr/bin/env bash
# Builds and tests plugins written in Go (see docs/plugin-guide.md, "In Go").
#
#   scripts/go-plugin.sh build <plugin dir> <component.wasm>
#   scripts/go-plugin.sh test  <dir>...   # go vet + go test, natively
#   scripts/go-plugin.sh env   <dir>...   # prints GOWORK=… for editors and go commands
#
# The plugin's module, the SDK (sdk-go) and the runtime package the
# generated bindings import are tied together by a go.work under
# target/go, because the Go module proxy this repository's CI reaches does
# not serve that runtime release: tools/plugin-build writes it, unmodified,
# from the wit-bindgen-go crate cargo fetched. Its go.mod asks for Go
# 1.27.1, so the go.work does too, and an older go fetches that toolchain
# (GOTOOLCHAIN=auto). Authors outside this repository get both modules from
# a module proxy instead (docs/plugin-guide.md).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The contract version the SDK implements (sdk-go's ContractVersion).
wit="$root/wit/v0.2.0"
out_dir="$root/target/go"
tool="$root/target/debug/plugin-build"

command="${1:?usage: go-plugin.sh build|test|env <dir>...}"
shift
if [ "$command" = build ] && [ $# -ne 2 ]; then
  echo "usage: go-plugin.sh build <plugin dir> <component.wasm>" >&2
  exit 2
fi

cargo build -q --manifest-path "$root/Cargo.toml" -p plugin-build
mkdir -p "$out_dir"
"$tool" go-runtime --out "$out_dir/runtime"

# One go.work per set of directories, named after them.
modules=("$@")
[ "$command" = build ] && modules=("$1")
dirs=()
for dir in "${modules[@]}"; do
  dir="$(cd "$dir" && pwd)"
  [ "$dir" = "$root/sdk-go" ] || dirs+=("$dir")
done
work="$out_dir/$(printf '%s\n' "${dirs[@]}" | sha256sum | cut -c1-12).work"
go_version="$(awk '$1 == "go" {print $2}' "$out_dir/runtime/go.mod")"
{
  echo "go $go_version"
  echo
  echo "use ("
  printf '\t%s\n' "$root/sdk-go" "$out_dir/runtime" "${dirs[@]}"
  echo ")"
} > "$work"
export GOWORK="$work" GOTOOLCHAIN=auto GOFLAGS=-mod=readonly

case "$command" in
  build)
    dir="${dirs[0]}"
    component="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
    core="$out_dir/$(basename "$dir").core.wasm"
    # -buildmode=c-shared: a reactor (`_initialize`, no main) whose exports
    # the host calls; -checklinkname=0: the runtime package links to
    # runtime.sbrk; -trimpath: the same bytes (and digest) on every machine.
    (cd "$dir" && GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared \
      -ldflags=-checklinkname=0 -o "$core" .)
    "$tool" componentize --wit "$wit" --core "$core" --out "$component"
    ;;
  test)
    for dir in "${modules[@]}"; do
      # -unsafeptr=false: the generated bindings turn canonical-ABI addresses
      # (uintptr) into pointers by design.
      (cd "$dir" && go vet -unsafeptr=false ./... && go test ./...)
    done
    ;;
  env)
    echo "GOWORK=$work"
    ;;
  *)
    echo "unknown command $command: build, test or env" >&2
    exit 2
    ;;
esac
