#!/usr/bin/env bash
# Builds the host binary the image ships and `task bench-scale` measures:
# static (musl), the workspace's `production` profile (Cargo.toml: release
# with whole-program optimisation, no symbols). A cold build takes 10–12
# minutes on 2 cores, most of it one core's link-time optimisation, so the
# binary is cached twice:
#   - the binary itself, keyed by a hash of everything it is built from
#     (rustc version, target, profile settings, Cargo.lock, the manifests and
#     sources of host/, sdk/ and wit/): a hit skips cargo entirely;
#   - cargo's target directory, per rustc version, so a miss rebuilds only
#     what changed.
# Both live under ${SPH_IMAGE_CACHE:-~/.cache/service-provider-host/image}.
#
# The binary's built-in grant gives kro's and flux's identities only to the
# components the image ships: their digests are built in
# (SERVICE_PROVIDER_HOST_SHIPPED_PLUGINS), so the plugins are built first
# (the same cargo invocations, in the same order, as scripts/build-image.sh),
# and the digests are part of the cache key and written next to the binary
# (`shipped-plugins`), where build-image.sh checks what it copies.
#
# One argument picks the architecture: x86_64 (the default) or aarch64, both
# `<arch>-unknown-linux-musl`; SPH_PROFILE another profile for both (CI's
# `production-thin`: its tests run the binaries for what they do, not how
# fast). aarch64 is cross-built with cargo-zigbuild
# (scripts/cross-toolchain.sh); its binary runs here under qemu-user-static.
#
# stdout carries only the `export …` line (eval it); progress goes to stderr.
#
#   eval "$(scripts/build-host-binary.sh)"           # SERVICE_PROVIDER_HOST_BINARY
#   eval "$(scripts/build-host-binary.sh aarch64)"   # SERVICE_PROVIDER_HOST_BINARY_AARCH64
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cache="${SPH_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/service-provider-host/image}"
arch="${1:-x86_64}"
case "$arch" in
  x86_64) variable=SERVICE_PROVIDER_HOST_BINARY ;;
  aarch64) variable=SERVICE_PROVIDER_HOST_BINARY_AARCH64 ;;
  *) echo "build-host-binary: unknown architecture $arch (x86_64 or aarch64)" >&2; exit 2 ;;
esac
triple="$arch-unknown-linux-musl"
# SPH_PROFILE (CI: production-thin) builds with another profile; a release
# and `task bench-scale` leave it unset.
profile="${SPH_PROFILE:-production}"
log() { echo "build-host-binary: $*" >&2; }

for tool in cargo sha256sum; do
  command -v "$tool" >/dev/null || { log "$tool is required"; exit 1; }
done
if [ "$arch" = x86_64 ] && ! command -v musl-gcc >/dev/null && ! command -v x86_64-linux-musl-gcc >/dev/null; then
  log "a musl C compiler is required for ring and psm (Debian: apt-get install musl-tools)"
  exit 1
fi

# --- the shipped plugins, and their digests -----------------------------------
# <plugin name>:<cargo package>:<file>; guest-flux first (it uses guest-kro as a
# library and writes an export-less guest_kro.wasm, which the next build
# replaces).
shipped=(
  "flux:guest-flux:guest_flux.wasm"
  "kro:guest-kro:guest_kro.wasm"
)
target_dir="${CARGO_TARGET_DIR:-$root/target}"
rustup target add wasm32-wasip2 >&2
# Both architectures' runs may build at once, and a guest-flux build
# rewrites guest_kro.wasm: the plugins are built and hashed by one at a time.
mkdir -p "$cache"
exec {plugins_lock}>"$cache/.plugins.lock"
flock "$plugins_lock"
pins=()
for entry in "${shipped[@]}"; do
  IFS=: read -r name package file <<<"$entry"
  cargo build --locked -p "$package" --target wasm32-wasip2 --profile plugin >&2
done
for entry in "${shipped[@]}"; do
  IFS=: read -r name package file <<<"$entry"
  digest="$(sha256sum "$target_dir/wasm32-wasip2/plugin/$file" | cut -d' ' -f1)"
  pins+=("$name=sha256:$digest")
done
exec {plugins_lock}>&-
export SERVICE_PROVIDER_HOST_SHIPPED_PLUGINS="${pins[*]}"
log "shipped plugins: $SERVICE_PROVIDER_HOST_SHIPPED_PLUGINS"

rustc_version="$(rustc -vV)"
sources=(Cargo.lock Cargo.toml host/Cargo.toml host/src host/templates sdk/Cargo.toml sdk/src wit tools/plugin-componentize)
[ -f host/build.rs ] && sources+=(host/build.rs)
[ -f .cargo/config.toml ] && sources+=(.cargo/config.toml)
key="$(
  {
    printf '%s\n%s\n%s\n%s\n' "$rustc_version" "$triple" "$profile" "$SERVICE_PROVIDER_HOST_SHIPPED_PLUGINS"
    find "${sources[@]}" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
)"
toolchain="$(rustc -vV | sha256sum | cut -c1-12)"
binary="$cache/bin/$key/service-provider-host"
# One build per architecture at a time (the task's dependencies and
# build-image.sh may ask at once): a second run waits, then finds the binary.
exec {lock_fd}>"$cache/.$triple.lock"
flock "$lock_fd"
if [ -x "$binary" ]; then
  log "cache hit ($key)"
else
  log "cache miss ($key): $profile build for $triple"
  rustup target add "$triple" >&2
  started=$SECONDS
  build=(build)
  if [ "$arch" != x86_64 ]; then
    eval "$(bash "$root/scripts/cross-toolchain.sh")"
    build=(zigbuild)
  fi
  CARGO_TARGET_DIR="$cache/cargo-target-$toolchain" \
    cargo "${build[@]}" --locked --profile "$profile" --target "$triple" -p service-provider-host --bin service-provider-host >&2
  mkdir -p "$(dirname "$binary")"
  printf '%s\n' "${pins[@]}" >"$(dirname "$binary")/shipped-plugins"
  echo "$triple" >"$(dirname "$binary")/triple"
  cp "$cache/cargo-target-$toolchain/$triple/$profile/service-provider-host" "$binary.tmp"
  mv "$binary.tmp" "$binary"
  log "built $triple ($profile) in $((SECONDS - started))s"
  # Keep the three newest binaries of each architecture and only the current
  # toolchain's target dir.
  declare -A kept=()
  while read -r dir; do
    built="$(cat "$dir/triple" 2>/dev/null || echo x86_64-unknown-linux-musl)"
    kept[$built]=$((${kept[$built]:-0} + 1))
    [ "${kept[$built]}" -le 3 ] || rm -rf "$dir"
  done < <(ls -1dt "$cache"/bin/*/ 2>/dev/null)
  find "$cache" -maxdepth 1 -name 'cargo-target-*' ! -name "cargo-target-$toolchain" -exec rm -rf {} +
fi
echo "export $variable=$binary"
