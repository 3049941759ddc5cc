#!/usr/bin/env bash
# Builds the container image of service-provider-host from `scratch` for
# linux/amd64 and linux/arm64, and one OCI image index over both:
# a static (musl) binary (production profile), the plugins at
# /plugins/<name>.wasm, their precompiled cache at /plugins/cache (written by
# each image's own binary before the build: natively for amd64, under
# qemu-user-static for arm64), CA certificates and a non-root user.
#
# stdout carries only `export …` lines (eval it); progress goes to stderr.
#
#   eval "$(scripts/build-image.sh)"   # exports SERVICE_PROVIDER_HOST_IMAGE (this machine's
#                                      # architecture) and SERVICE_PROVIDER_HOST_IMAGE_INDEX
#
# The expensive part, the musl builds of the host, is
# scripts/build-host-binary.sh (cached by source hash; `task bench-scale`
# measures the same binary). An empty cache works, it is only slower.
#
# Environment:
#   IMAGE            the index to tag (default localhost/service-provider-host:dev); the
#                    images are tagged <IMAGE>-amd64 and <IMAGE>-arm64
#   ARCHES           the architectures (default "x86_64 aarch64")
#   SPH_IMAGE_CACHE  cache root of the host binary (scripts/build-host-binary.sh)
#   BUILDAH_STORAGE  buildah storage driver (default vfs: works without overlay support)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
image="${IMAGE:-localhost/service-provider-host:dev}"
arches="${ARCHES:-x86_64 aarch64}"
storage="${BUILDAH_STORAGE:-vfs}"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
log() { echo "build-image: $*" >&2; }
started=$SECONDS
# One run at a time: the build context, the precompiled cache and the tags
# are shared. A second run waits, then finds the images built.
mkdir -p "$target_dir/image"
exec {lock_fd}>"$target_dir/image/.lock"
flock "$lock_fd"
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

# --- the plugins --------------------------------------------------------------
packages=()
metadata="$(cargo metadata --no-deps --format-version 1 --offline)"
for entry in "${plugins[@]}"; do
  IFS=: read -r _ package _ <<<"$entry"
  [[ "$metadata" == *"\"name\":\"$package\""* ]] && packages+=(-p "$package")
done
log "plugins: ${packages[*]}"
for ((i = 0; i < ${#packages[@]}; i += 2)); do
  cargo build --locked "${packages[i]}" "${packages[i + 1]}" --target wasm32-wasip2 --profile plugin >&2
done

# --- one image per architecture -------------------------------------------------
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || { log "$ca is missing (Debian: apt-get install ca-certificates)"; exit 1; }
tagged=()
for arch in $arches; do
  case "$arch" in
    x86_64) platform=amd64 run=() ;;
    aarch64) platform=arm64 run=(qemu-aarch64-static) ;;
    *) log "unknown architecture $arch"; exit 2 ;;
  esac
  if [ ${#run[@]} -gt 0 ] && ! command -v "${run[0]}" >/dev/null; then
    log "${run[0]} is required to precompile the $platform image's plugins (Debian: apt-get install qemu-user-static)"
    exit 1
  fi
  # The host binary: static musl, `production` profile, cached by source hash.
  exports="$(bash "$root/scripts/build-host-binary.sh" "$arch")"
  eval "$exports"
  variable=SERVICE_PROVIDER_HOST_BINARY
  [ "$arch" = x86_64 ] || variable=SERVICE_PROVIDER_HOST_BINARY_AARCH64
  binary="${!variable}"
  echo "$exports"
  key="$(basename "$(dirname "$binary")")"
  tag="$image-$platform"
  # An image built from the same binary (its key covers the plugins and
  # their cache), Containerfile, CA bundle and commit is reused (the
  # release's dry run after the tests).
  revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
  image_key="$(cat <(echo "$key $revision") "$root/Containerfile" "$ca" | sha256sum | cut -c1-16)"
  built_key="$(buildah --storage-driver "$storage" inspect --type image \
    --format '{{index .OCIv1.Config.Labels "service-provider-host.image-key"}}' "$tag" 2>/dev/null || true)"
  if [ "$built_key" = "$image_key" ]; then
    log "image $tag is built from $image_key already"
  else
    context="$target_dir/image/$platform/context"
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
    # Every plugin compiled once, by the image's own binary, into a cache the
    # runtime user can read but not change: start-up then skips compiling.
    # The binary's key covers the plugins it pins, so the compiled cache is
    # kept next to it (under emulation it takes minutes).
    precompiled="$(dirname "$binary")/precompiled"
    if [ ! -d "$precompiled" ]; then
      log "precompiling the $platform image's plugins${run:+ under ${run[0]}}"
      # Two checkouts may build at once (the lock above is per target
      # directory, this cache is not): each compiles into a directory of its
      # own, and the first to finish puts it in place.
      scratch="$(mktemp -d "$precompiled.XXXXXX")"
      "${run[@]}" "$binary" precompile --plugin-cache-dir "$scratch" "$context/plugins" >&2
      mv -T "$scratch" "$precompiled" 2>/dev/null || rm -rf "$scratch"
    fi
    cp -r "$precompiled" "$context/plugins/cache"
    # The host writes its artifacts for its own user only; in the image they
    # belong to root and the runtime user reads them (and cannot write them).
    chmod -R u=rwX,go=rX "$context/plugins/cache"
    cp "$ca" "$context/etc/ssl/certs/ca-certificates.crt"
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' \
      >"$context/etc/passwd"
    printf 'root:x:0:\nnonroot:x:65532:\n' >"$context/etc/group"

    previous="$(buildah --storage-driver "$storage" images --noheading --format '{{.ID}}' "$tag" 2>/dev/null || true)"
    log "buildah bud $tag"
    buildah --storage-driver "$storage" bud --isolation chroot --layers=false --platform "linux/$platform" \
      --label "org.opencontainers.image.revision=$revision" \
      --label "service-provider-host.image-key=$image_key" \
      --label "org.opencontainers.image.version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -1)" \
      --label "org.opencontainers.image.licenses=Apache-2.0" \
      --label "service-provider-host.binary-key=$key" \
      -f "$root/Containerfile" -t "$tag" "$context" >&2
    current="$(buildah --storage-driver "$storage" images --noheading --format '{{.ID}}' "$tag")"
    if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
      buildah --storage-driver "$storage" rmi "$previous" >/dev/null 2>&1 || true
    fi
    size="$(buildah --storage-driver "$storage" images --noheading --format '{{.Size}}' "$tag")"
    log "image $tag ($current): $size"
  fi
  tagged+=("$tag")
  [ "$(uname -m)" != "$arch" ] || echo "export SERVICE_PROVIDER_HOST_IMAGE=$tag"
done

# --- the index over both ----------------------------------------------------------
buildah --storage-driver "$storage" manifest rm "$image" >/dev/null 2>&1 || true
buildah --storage-driver "$storage" rmi "$image" >/dev/null 2>&1 || true
buildah --storage-driver "$storage" manifest create "$image" >/dev/null
for tag in "${tagged[@]}"; do
  buildah --storage-driver "$storage" manifest add "$image" "containers-storage:$tag" >/dev/null
done
log "index $image (${tagged[*]}), built in $((SECONDS - started))s"
echo "export SERVICE_PROVIDER_HOST_IMAGE_INDEX=$image"
echo "export BUILDAH_STORAGE=$storage"
