#!/usr/bin/env bash
# Builds every artifact of a release and publishes it to a registry
# (docs/releasing.md):
#   - the image index service-provider-host:<version> (linux/amd64, linux/arm64);
#   - the plugins plugins/<name>:<version>, each signed with cosign;
#   - the OCM components components//open-control-plane.io/service-provider-host/
#     service-provider-<name>:<version>, each signed (OCM, RSA), then verified
#     twice: by this project's tool and by Gardener's OCM library (check.py);
#   - the Rust SDK crate service-provider-sdk to crates.io (CARGO_REGISTRY_TOKEN;
#     packaged and verified for wasm32-wasip2 in a dry run), the TypeScript SDK
#     @open-control-plane/service-provider-sdk to npmjs.com (NPM_TOKEN), and the tag
#     sdk-go/v<version> from which the Go module proxy serves the Go SDK;
#   - under target/release-artifacts/<version>/: both binaries, the plugins, the SDK crate, a CycloneDX
#     SBOM of the host (cargo-cyclonedx), the ServiceProvider a landscape's
#     bootstrapper writes from each component, and SHA256SUMS over them all.
#
#   scripts/release.sh <version> <registry>        # e.g. 0.2.0 ghcr.io/example/sph
#   DRY_RUN=1 scripts/release.sh <version>         # a local registry and throwaway keys
#
# Environment (not for a dry run):
#   COSIGN_KEY      the plugins' cosign private key (COSIGN_PASSWORD as cosign reads it)
#   OCM_KEY         the components' RSA private key (PKCS#8 PEM; `release keygen` writes one)
#   OCM_PUBLIC_KEY  the public key landscapes trust: the components are checked with it
#   FORCE=1         publish although the version is in the registry already
#   INSECURE        a registry host reached over plain HTTP
# Registry credentials come from ~/.docker/config.json, which buildah, cosign,
# the host's `plugin push` and the tool all read
# (`buildah login --authfile ~/.docker/config.json <registry>`).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
version="${1:?usage: release.sh <version> [<registry>]}"
registry="${2:-}"
log() { echo "release: $*" >&2; }
started=$SECONDS
storage="${BUILDAH_STORAGE:-vfs}"
# The providers: <name>:<cargo package>:<plugin file>.
providers=("kro:guest-kro:guest_kro.wasm" "flux:guest-flux:guest_flux.wasm")
component_prefix="open-control-plane.io/service-provider-host"

# --- the version: the workspace's, with a CHANGELOG entry --------------------------
workspace_version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"
[ "$version" = "$workspace_version" ] || { log "version $version is not the workspace's ($workspace_version): set it in Cargo.toml"; exit 1; }
[[ "$version" =~ ^0\.[0-9]+\.[0-9]+$ ]] || { log "version $version: a v0.x semantic version (0.MINOR.PATCH)"; exit 1; }
grep -q "^## \[$version\]" CHANGELOG.md || { log "CHANGELOG.md has no '## [$version]' section"; exit 1; }

out="$root/target/release-artifacts/$version"
rm -rf "$out"
mkdir -p "$out/keys" "$out/bootstrapper"

# --- tools: cosign and the registry (cached Go builds), the release tool ----------
eval "$(bash tests/testbed/scripts/build-flux-bins.sh)"
cosign="${COSIGN:-$TESTBED_COSIGN}"
cargo build -q --locked -p release >&2
release="${CARGO_TARGET_DIR:-$root/target}/debug/release"

registry_pid=
cleanup() { [ -z "$registry_pid" ] || kill "$registry_pid" 2>/dev/null || true; }
trap cleanup EXIT
if [ "${DRY_RUN:-0}" = 1 ]; then
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  registry="127.0.0.1:$port/service-provider-host"
  INSECURE="127.0.0.1:$port"
  mkdir -p "$out/registry"
  printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
    "$out/registry/data" "$port" >"$out/registry/config.yml"
  "$TESTBED_REGISTRY" serve "$out/registry/config.yml" >"$out/registry/log" 2>&1 &
  registry_pid=$!
  for _ in $(seq 100); do curl -sf "http://$INSECURE/v2/" >/dev/null && break; sleep 0.1; done
  curl -sf "http://$INSECURE/v2/" >/dev/null || { log "the local registry did not start: $(cat "$out/registry/log")"; exit 1; }
  (cd "$out/keys" && COSIGN_PASSWORD= "$cosign" generate-key-pair >/dev/null 2>&1)
  COSIGN_KEY="$out/keys/cosign.key"
  export COSIGN_PASSWORD=
  "$release" keygen --out "$out/keys"
  OCM_KEY="$out/keys/ocm.key"
  OCM_PUBLIC_KEY="$out/keys/ocm.pub"
  log "dry run: registry $registry, throwaway keys in $out/keys"
else
  # A release is made from a commit, once.
  git diff --quiet HEAD || { log "the working tree has changes: release from a commit"; exit 1; }
fi
[ -n "$registry" ] || { log "usage: release.sh <version> <registry> (or DRY_RUN=1)"; exit 1; }
: "${COSIGN_KEY:?COSIGN_KEY: the plugins' cosign private key}" "${OCM_KEY:?OCM_KEY: the components' RSA private key}"
insecure=()
tls=()
cosign_http=()
if [ -n "${INSECURE:-}" ]; then
  insecure=(--insecure-registry "$INSECURE")
  tls=(--tls-verify=false)
  cosign_http=(--allow-http-registry --allow-insecure-registry)
fi
# The public key that goes into each ServiceProvider configuration.
cosign_pub="$out/keys/cosign.pub"
[ -f "$cosign_pub" ] || COSIGN_PASSWORD="${COSIGN_PASSWORD:-}" "$cosign" public-key --key "$COSIGN_KEY" --outfile "$cosign_pub"

first_component="$registry/components//$component_prefix/service-provider-${providers[0]%%:*}:$version"
if [ "${FORCE:-0}" != 1 ] && "$release" "${insecure[@]}" get "$first_component" >/dev/null 2>&1; then
  log "$first_component exists: a version is published once (FORCE=1 to overwrite)"
  exit 1
fi

# --- the image index -------------------------------------------------------------
image_exports="$(bash scripts/build-image.sh)"
eval "$image_exports"
index="$SERVICE_PROVIDER_HOST_IMAGE_INDEX"
buildah --storage-driver "$storage" manifest push --all "${tls[@]}" --digestfile "$out/index.digest" \
  "$index" "docker://$registry/service-provider-host:$version" >&2
image="$registry/service-provider-host:$version@$(cat "$out/index.digest")"
log "image index $image"
cp "$SERVICE_PROVIDER_HOST_BINARY" "$out/service-provider-host-linux-amd64"
cp "$SERVICE_PROVIDER_HOST_BINARY_AARCH64" "$out/service-provider-host-linux-arm64"
host="$SERVICE_PROVIDER_HOST_BINARY"

# --- plugins and components ------------------------------------------------------------
landscape_refs=()
for entry in "${providers[@]}"; do
  IFS=: read -r name package file <<<"$entry"
  wasm="${CARGO_TARGET_DIR:-$root/target}/wasm32-wasip2/plugin/$file"
  cp "$wasm" "$out/$name.wasm"
  plugin="$("$host" plugin push "$wasm" "oci://$registry/plugins/$name:$version" "${insecure[@]}")"
  plugin="${plugin#oci://}"
  "$cosign" sign --key "$COSIGN_KEY" --tlog-upload=false --use-signing-config=false --new-bundle-format=true \
    "${cosign_http[@]}" --yes "$plugin" >"$out/cosign.log" 2>&1 || { cat "$out/cosign.log" >&2; exit 1; }
  component="$component_prefix/service-provider-$name"
  crds=()
  for crd in crds/"$name".services.open-control-plane.io_*.yaml; do
    [ -f "$crd" ] || { log "no CRDs of $name under crds/"; exit 1; }
    crds+=(--crd "$crd")
  done
  "$release" "${insecure[@]}" component "$registry/components//$component:$version" --image "$image" --plugin "$plugin" \
    "${crds[@]}" --plugin-verify-key "$cosign_pub" --sign-key "$OCM_KEY" >&2
  landscape_refs+=(--reference "service-provider-$name=$component:$version")
done

# --- verification: this tool, and an independent OCM implementation ------------------
venv="$(bash scripts/cached-tool.sh pypi gardener-ocm 1.2863.0)"
# Checked with the key landscapes trust, not one derived from the signing key.
ocm_pub="${OCM_PUBLIC_KEY:?OCM_PUBLIC_KEY: the public key landscapes verify the components with}"
components=()
for entry in "${providers[@]}"; do
  name="${entry%%:*}"
  at="$registry/components//$component_prefix/service-provider-$name:$version"
  "$release" "${insecure[@]}" verify "$at" --key "$ocm_pub"
  components+=("$at")
done
plain=()
[ -z "${INSECURE:-}" ] || plain=(--plain-http)
"$venv/bin/python" tools/release/check.py "${plain[@]}" --key "$ocm_pub" "${components[@]}" >&2

# What a landscape's bootstrapper writes from these components: a root
# component referencing them (a landscape has its own), then each
# ServiceProvider and its platform CRDs.
if [ "${DRY_RUN:-0}" = 1 ]; then
  landscape="$registry/components//example.org/landscape/openmcp:$version"
  "$release" "${insecure[@]}" root "$landscape" "${landscape_refs[@]}" >&2
  for entry in "${providers[@]}"; do
    name="${entry%%:*}"
    "$release" "${insecure[@]}" service-provider "$landscape" --name "$name" --verify-key "$ocm_pub" \
      --crds-out "$out/bootstrapper/$name-crds" >"$out/bootstrapper/serviceprovider-$name.yaml"
  done
fi

# --- the SDKs ------------------------------------------------------------------------------
# The crate as crates.io will serve it (the contract's WIT inside), verified
# by a build for the plugin target; the Go SDK is served by the Go module
# proxy from the tag (docs/releasing.md).
cargo package -q -p service-provider-sdk --target wasm32-wasip2 >&2
cp "target/package/service-provider-sdk-$version.crate" "$out/"
(cd sdk-ts && npm pack --silent --pack-destination "$out" >/dev/null)
[ "$(node -p 'require("./sdk-ts/package.json").version')" = "$version" ] \
  || { log "sdk-ts/package.json is not at version $version"; exit 1; }
# What the registries will check of the npm package, without an upload.
npm publish --dry-run --access public "$out/open-control-plane-service-provider-sdk-$version.tgz" >&2 2>/dev/null \
  || { log "npm refuses the TypeScript SDK's package"; exit 1; }
if [ -z "${DRY_RUN:-}" ]; then
  # A release publishes the SDKs: authors' templates take them from there.
  # PUBLISH_SDKS=0 leaves them to a maintainer (each step then says what to run).
  if [ "${PUBLISH_SDKS:-1}" = 1 ]; then
    : "${CARGO_REGISTRY_TOKEN:?CARGO_REGISTRY_TOKEN: crates.io token to publish service-provider-sdk (or PUBLISH_SDKS=0)}"
    : "${NPM_TOKEN:?NPM_TOKEN: npm token to publish @open-control-plane/service-provider-sdk (or PUBLISH_SDKS=0)}"
    cargo publish -q -p service-provider-sdk --target wasm32-wasip2 >&2
    # The token in a user config of its own, removed after.
    npmrc="$(mktemp)"
    printf '//registry.npmjs.org/:_authToken=%s\n' "$NPM_TOKEN" >"$npmrc"
    npm publish --userconfig "$npmrc" --access public "$out/open-control-plane-service-provider-sdk-$version.tgz" >&2 \
      || { rm -f "$npmrc"; exit 1; }
    rm -f "$npmrc"
  else
    log "PUBLISH_SDKS=0: publish target/release-artifacts/$version/service-provider-sdk-$version.crate with cargo publish, and $out/open-control-plane-service-provider-sdk-$version.tgz with npm publish"
  fi
  # The Go SDK is served by the Go module proxy from this tag, once pushed
  # (the release workflow pushes it with v$version).
  git tag -a "sdk-go/v$version" -m "Go SDK $version" 2>/dev/null || log "tag sdk-go/v$version exists"
fi

# --- SBOM and checksums ------------------------------------------------------------------
cyclonedx="$(bash scripts/cached-tool.sh crates cargo-cyclonedx 0.5.7)"
PATH="$cyclonedx/bin:$PATH" cargo cyclonedx --manifest-path host/Cargo.toml --format json --spec-version 1.5 \
  --target x86_64-unknown-linux-musl --override-filename service-provider-host.cdx >&2
mv host/service-provider-host.cdx.json "$out/service-provider-host.cdx.json"
# cargo-cyclonedx writes one into every workspace member; only the host's is kept.
find . -name service-provider-host.cdx.json -not -path './target/*' -delete
(cd "$out" && find . -maxdepth 1 -type f ! -name SHA256SUMS ! -name index.digest ! -name cosign.log -printf '%f\n' | LC_ALL=C sort \
  | xargs sha256sum >SHA256SUMS)
log "published $version to $registry in $((SECONDS - started))s; artifacts in $out"
cat "$out/SHA256SUMS"
