#!/usr/bin/env bash
# Builds the container image of service-provider-host from `scratch`:
# a static (musl) binary (production profile), the plugins at /plugins/<name>.wasm, their
# precompiled cache at /plugins/cache (written by the image's own binary
# during the build), CA certificates and a non-root user.
#
# stdout carries only `export …` lines (eval it); progress goes to stderr.
#
#   eval "$(scripts/build-image.sh)"   # exports SERVICE_PROVIDER_HOST_IMAGE
#
# The expensive part, the musl build of the host, is
# scripts/build-host-binary.sh (cached by source hash; `task bench-scale`
# measures the same binary). An empty cache works, it is only slower.
#
# Environment:
#   IMAGE            image reference to tag (default localhost/service-provider-host:dev)
#   SPH_IMAGE_CACHE  cache root of the host binary (scripts/build-host-binary.sh)
#   BUILDAH_STORAGE  buildah storage driver (default vfs: works without overlay support)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
image="${IMAGE:-localhost/service-provider-host:dev}"
storage="${BUILDAH_STORAGE:-vfs}"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
context="$target_dir/image/context"
log() { echo "build-image: $*" >&2; }
started=$SECONDS

# The plugins in the image: <name in /plugins>:<cargo package>:<file>. A
# plugin whose package is not in this checkout is skipped. Each is built by
# a cargo invocation of its own, in this order: guest-flux uses guest-kro as
# a library without its export, and one invocation would unify the two
# crates' features (both exports in guest-flux: duplicate symbols); building
# guest-flux also writes an export-less guest_kro.wasm, which the next
# build replaces.
plugins=(
  "flux:guest-flux:guest_flux.wasm"
  "kro:guest-kro:guest_kro.wasm"
)

for tool in buildah cargo; do
  command -v "$tool" >/dev/null || { log "$tool is required (buildah: apt-get install buildah)"; exit 1; }
done
rustup target add wasm32-wasip2 >&2

# --- the host binary: static musl, `production` profile, cached by source hash
exports="$(bash "$root/scripts/build-host-binary.sh")"
eval "$exports"
binary="$SERVICE_PROVIDER_HOST_BINARY"
key="$(basename "$(dirname "$binary")")"

# --- the plugins --------------------------------------------------------------
packages=()
for entry in "${plugins[@]}"; do
  IFS=: read -r _ package _ <<<"$entry"
  cargo metadata --no-deps --format-version 1 --offline 2>/dev/null | grep -q "\"name\":\"$package\"" &&
    packages+=(-p "$package")
done
log "plugins: ${packages[*]}"
for ((i = 0; i < ${#packages[@]}; i += 2)); do
  cargo build --locked "${packages[i]}" "${packages[i + 1]}" --target wasm32-wasip2 --profile plugin >&2
done

# --- the build context ----------------------------------------------------------
rm -rf "$context"
mkdir -p "$context/plugins" "$context/etc/ssl/certs"
cp "$binary" "$context/service-provider-host"
for entry in "${plugins[@]}"; do
  IFS=: read -r name package file <<<"$entry"
  [ -f "$target_dir/wasm32-wasip2/plugin/$file" ] && [[ " ${packages[*]} " == *" $package "* ]] &&
    cp "$target_dir/wasm32-wasip2/plugin/$file" "$context/plugins/$name.wasm"
done
# The binary's built-in grant pins these exact bytes (build-host-binary.sh):
# an image whose plugins differ would refuse them.
while read -r pin; do
  [ -n "$pin" ] || continue
  name="${pin%%=*}"
  digest="${pin#*=sha256:}"
  copied="$context/plugins/$name.wasm"
  if [ ! -f "$copied" ] || [ "$(sha256sum "$copied" | cut -d' ' -f1)" != "$digest" ]; then
    log "plugins/$name.wasm is not the component the binary pins ($digest): rebuild with scripts/build-host-binary.sh"
    exit 1
  fi
done <"$(dirname "$binary")/shipped-plugins"
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || { log "$ca is missing (Debian: apt-get install ca-certificates)"; exit 1; }
cp "$ca" "$context/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' \
  >"$context/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$context/etc/group"

# --- the image ------------------------------------------------------------------
previous="$(buildah --storage-driver "$storage" images --noheading --format '{{.ID}}' "$image" 2>/dev/null || true)"
log "buildah bud $image"
buildah --storage-driver "$storage" bud --isolation chroot --layers=false \
  --label "org.opencontainers.image.revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
  --label "service-provider-host.binary-key=$key" \
  -f "$root/Containerfile" -t "$image" "$context" >&2
current="$(buildah --storage-driver "$storage" images --noheading --format '{{.ID}}' "$image")"
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
  buildah --storage-driver "$storage" rmi "$previous" >/dev/null 2>&1 || true
fi
size="$(buildah --storage-driver "$storage" images --noheading --format '{{.Size}}' "$image")"
log "image $image ($current): $size, built in $((SECONDS - started))s"
echo "export SERVICE_PROVIDER_HOST_IMAGE=$image"
echo "export BUILDAH_STORAGE=$storage"
