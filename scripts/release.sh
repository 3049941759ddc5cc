#!/usr/bin/env bash
# A release in phases, each an entry point of its own, so that the code
# that builds never runs beside the keys (docs/releasing.md):
#
#   build    every artifact, from the checkout, into target/release-artifacts/<version>/:
#            both binaries, the plugins, the SDK crate and npm package, a CycloneDX
#            SBOM of the host (cargo-cyclonedx), SHA256SUMS over them, and under
#            build/ the image index as an OCI archive and the `release` tool that
#            publishes the components. Runs cargo, npm, Go and buildah; needs no
#            key, no token and no registry.
#   publish  pushes what `build` left and signs it, running nothing that builds:
#            the image index (its digest must stay the one built), the plugins
#            plugins/<name>:<version>, the OCM components
#            components//open-control-plane.io/service-provider-host/service-provider-<name>:<version>
#            (signed with the RSA key by the `release` tool, then verified by it);
#            cosign signs the image index, each plugin and each file, writing
#            <file>.sigstore.json beside it.
#   sdks     publishes the SDK crate to crates.io and the npm package to npmjs.com
#            (CARGO_REGISTRY_TOKEN, NPM_TOKEN), building nothing.
#   verify   reads the release back with no key: SHA256SUMS, every cosign bundle and
#            signature, and each component twice, by the `release` tool and by
#            Gardener's OCM library (tools/release/check.py, from PyPI).
#
#   scripts/release.sh build <version>
#   scripts/release.sh publish <version> <registry>     # e.g. 0.2.0 ghcr.io/example/sph
#   scripts/release.sh verify <version> <registry>
#   scripts/release.sh sdks <version>
#   scripts/release.sh <version> <registry>             # all of it from a workstation, and the tag sdk-go/v<version>
#   DRY_RUN=1 scripts/release.sh <version>              # build, publish, verify: a local registry, throwaway keys
#
# How cosign signs: a release signs keyless (a Fulcio certificate for the OIDC
# identity of the signer, the release workflow on the forge, recorded in the
# Rekor transparency log); the plugins are signed once more with the plugin key
# (COSIGN_KEY), also recorded in Rekor, since that key is what the host checks.
# A dry run has no OIDC identity and no Rekor (it runs offline): it signs
# everything with its throwaway key and records nothing.
#
# Environment of publish (not for a dry run):
#   COSIGN_KEY      the plugins' cosign private key (COSIGN_PASSWORD as cosign reads it)
#   OCM_KEY         the components' RSA private key (PKCS#8 PEM; `release keygen` writes one)
#   OCM_PUBLIC_KEY  the public key landscapes trust: the components are checked with it
#   COSIGN          cosign (default: `cosign` on PATH)
#   FORCE=1         publish although the version is in the registry already
# Environment of verify (not for a dry run):
#   OCM_PUBLIC_KEY, COSIGN as above; COSIGN_PUBLIC_KEY the plugins' public key
#   CERT_IDENTITY   the signer's identity in the certificates, e.g.
#                   https://github.com/<owner>/<repo>/.github/workflows/release.yaml@refs/tags/v<version>
#   CERT_ISSUER     its OIDC issuer (default https://token.actions.githubusercontent.com)
# Both: INSECURE, a registry host reached over plain HTTP.
# Registry credentials come from ~/.docker/config.json, which buildah, cosign,
# the host's `plugin push` and the tool all read
# (`buildah login --authfile ~/.docker/config.json <registry>`).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
log() { echo "release: $*" >&2; }
usage="usage: release.sh build|sdks <version> | publish|verify <version> <registry> | <version> <registry> | DRY_RUN=1 release.sh <version>"
started=$SECONDS
storage="${BUILDAH_STORAGE:-vfs}"
dry_run="${DRY_RUN:-0}"
# The providers: <name>:<cargo package>:<plugin file>.
providers=("kro:guest-kro:guest_kro.wasm" "flux:guest-flux:guest_flux.wasm")
component_prefix="open-control-plane.io/service-provider-host"

case "${1:-}" in
  build | publish | verify | sdks) phase="$1"; shift ;;
  "") echo "$usage" >&2; exit 2 ;;
  *) phase=all ;;
esac
version="${1:?$usage}"
registry="${2:-}"

# --- the version: the workspace's, with a CHANGELOG entry --------------------------
workspace_version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"
[ "$version" = "$workspace_version" ] || { log "version $version is not the workspace's ($workspace_version): set it in Cargo.toml"; exit 1; }
[[ "$version" =~ ^0\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]] || { log "version $version: a v0.x semantic version (0.MINOR.PATCH)"; exit 1; }
grep -q "^## \[$version\]" CHANGELOG.md || { log "CHANGELOG.md has no '## [$version]' section"; exit 1; }

out="$root/target/release-artifacts/$version"
# What the build leaves beside the release's files: the image index and the tool.
built="$out/build"
# What publish leaves for verify: the pushed references and the public keys.
published="$out/published"
# The files of the forge release, each with a cosign bundle <file>.sigstore.json.
release_files() {
  echo service-provider-host-linux-amd64 service-provider-host-linux-arm64
  for entry in "${providers[@]}"; do echo "${entry%%:*}.wasm"; done
  echo service-provider-host.cdx.json "service-provider-sdk-$version.crate" \
    "open-control-plane-service-provider-sdk-$version.tgz" SHA256SUMS
}

# --- build -----------------------------------------------------------------------------
build() {
  rm -rf "$out"
  mkdir -p "$built"
  # A release is made from a commit, once.
  [ "$dry_run" = 1 ] || git diff --quiet HEAD || { log "the working tree has changes: release from a commit"; exit 1; }

  # The tool that writes and signs the components, for publish: it runs there
  # with the RSA key, so it is built here, from the locked dependencies.
  cargo build -q --locked -p release >&2
  cp "${CARGO_TARGET_DIR:-$root/target}/debug/release" "$built/release"

  # The image index, exported with its digest: publish pushes these bytes.
  local exports
  exports="$(IMAGE="localhost/service-provider-host:release-$version" bash scripts/build-image.sh)"
  eval "$exports"
  buildah --storage-driver "$storage" manifest push --all --format oci --digestfile "$built/index.digest" \
    "$SERVICE_PROVIDER_HOST_IMAGE_INDEX" "oci-archive:$built/index.oci.tar" >&2
  log "image index $(cat "$built/index.digest"), exported"
  cp "$SERVICE_PROVIDER_HOST_BINARY" "$out/service-provider-host-linux-amd64"
  cp "$SERVICE_PROVIDER_HOST_BINARY_AARCH64" "$out/service-provider-host-linux-arm64"
  local entry name file
  for entry in "${providers[@]}"; do
    IFS=: read -r name _ file <<<"$entry"
    cp "${CARGO_TARGET_DIR:-$root/target}/wasm32-wasip2/plugin/$file" "$out/$name.wasm"
  done

  # The SDKs: the crate as crates.io will serve it (the contract's WIT inside),
  # verified by a build for the plugin target; the npm package as npmjs.com
  # will serve it. The Go SDK is served by the Go module proxy from the tag
  # sdk-go/v<version> (docs/releasing.md).
  cargo package -q -p service-provider-sdk --target wasm32-wasip2 >&2
  cp "${CARGO_TARGET_DIR:-$root/target}/package/service-provider-sdk-$version.crate" "$out/"
  [ "$(node -p 'require("./sdk-ts/package.json").version')" = "$version" ] \
    || { log "sdk-ts/package.json is not at version $version"; exit 1; }
  (cd sdk-ts && npm pack --silent --pack-destination "$out" >/dev/null)
  # What the registry will check of the npm package, without an upload.
  npm publish --dry-run --ignore-scripts --access public "$out/open-control-plane-service-provider-sdk-$version.tgz" >/dev/null 2>&1 \
    || { log "npm refuses the TypeScript SDK's package"; exit 1; }

  # The SBOM of the host.
  local cyclonedx
  cyclonedx="$(bash scripts/cached-tool.sh crates cargo-cyclonedx 0.5.7)"
  PATH="$cyclonedx/bin:$PATH" cargo cyclonedx --manifest-path host/Cargo.toml --format json --spec-version 1.5 \
    --target x86_64-unknown-linux-musl --override-filename service-provider-host.cdx >&2
  mv host/service-provider-host.cdx.json "$out/service-provider-host.cdx.json"
  # cargo-cyclonedx writes one into every workspace member; only the host's is kept.
  find . -name service-provider-host.cdx.json -not -path './target/*' -delete

  local files
  read -r -a files <<<"$(release_files | tr '\n' ' ')"
  (cd "$out" && LC_ALL=C sha256sum "${files[@]:0:${#files[@]}-1}" >SHA256SUMS)
  log "built $version in $((SECONDS - started))s: $out"
  cat "$out/SHA256SUMS"
}

# --- publish: pushes and signs, builds nothing ----------------------------------------
insecure=()
tls=()
cosign_http=()
set_insecure() {
  [ -n "${INSECURE:-}" ] || return 0
  insecure=(--insecure-registry "$INSECURE")
  tls=(--tls-verify=false)
  cosign_http=(--allow-http-registry --allow-insecure-registry)
}

# cosign's signing: keyless with the transparency log for a release; the
# dry run's only exception is the one line below.
offline_signing=()
if [ "$dry_run" = 1 ]; then
  offline_signing=(--tlog-upload=false --use-signing-config=false)
fi
# Signs an OCI artifact by digest: keyless; in a dry run with the throwaway key.
sign_artifact() {
  if [ "$dry_run" = 1 ]; then
    "$cosign" sign --key "$COSIGN_KEY" "${offline_signing[@]}" "${cosign_http[@]}" --yes "$1"
  else
    "$cosign" sign "${cosign_http[@]}" --yes "$1"
  fi >"$published/cosign.log" 2>&1 || { cat "$published/cosign.log" >&2; exit 1; }
}
# Signs a file into <file>.sigstore.json: keyless; in a dry run with the throwaway key.
sign_file() {
  if [ "$dry_run" = 1 ]; then
    "$cosign" sign-blob --key "$COSIGN_KEY" "${offline_signing[@]}" --yes --bundle "$1.sigstore.json" "$1"
  else
    "$cosign" sign-blob --yes --bundle "$1.sigstore.json" "$1"
  fi >"$published/cosign.log" 2>&1 || { cat "$published/cosign.log" >&2; exit 1; }
}

publish() {
  [ -n "$registry" ] || { log "$usage"; exit 1; }
  : "${COSIGN_KEY:?COSIGN_KEY: the plugins' cosign private key}" "${OCM_KEY:?OCM_KEY: the components' RSA private key}"
  : "${OCM_PUBLIC_KEY:?OCM_PUBLIC_KEY: the public key landscapes verify the components with}"
  cosign="${COSIGN:-cosign}"
  command -v "$cosign" >/dev/null || { log "cosign is required (COSIGN)"; exit 1; }
  [ -f "$built/index.oci.tar" ] || { log "nothing built for $version under $out: run release.sh build $version first"; exit 1; }
  set_insecure
  # Checked against what the build recorded, before anything is pushed.
  (cd "$out" && sha256sum --quiet -c SHA256SUMS) || { log "the files differ from SHA256SUMS"; exit 1; }
  rm -rf "$published"
  mkdir -p "$published"
  # Artifacts lose the executable bit on the forge.
  chmod +x "$built/release" "$out/service-provider-host-linux-amd64"
  local release="$built/release" host="$out/service-provider-host-linux-amd64"
  # The public key that goes into each ServiceProvider configuration.
  COSIGN_PASSWORD="${COSIGN_PASSWORD:-}" "$cosign" public-key --key "$COSIGN_KEY" --outfile "$published/cosign.pub" 2>/dev/null
  cp "$OCM_PUBLIC_KEY" "$published/ocm.pub"

  local first_component="$registry/components//$component_prefix/service-provider-${providers[0]%%:*}:$version"
  if [ "${FORCE:-0}" != 1 ] && "$release" "${insecure[@]}" get "$first_component" >/dev/null 2>&1; then
    log "$first_component exists: a version is published once (FORCE=1 to overwrite)"
    exit 1
  fi

  # The image index: the bytes built, so the digest stays the one built.
  local list="localhost/service-provider-host:publish-$version" digest image
  buildah --storage-driver "$storage" manifest rm "$list" >/dev/null 2>&1 || true
  buildah --storage-driver "$storage" manifest create --all "$list" "oci-archive:$built/index.oci.tar" >/dev/null
  buildah --storage-driver "$storage" manifest push --all --format oci "${tls[@]}" --digestfile "$published/index.digest" \
    "$list" "docker://$registry/service-provider-host:$version" >&2
  buildah --storage-driver "$storage" manifest rm "$list" >/dev/null
  digest="$(cat "$published/index.digest")"
  [ "$digest" = "$(cat "$built/index.digest")" ] \
    || { log "the pushed index is $digest, not the one built ($(cat "$built/index.digest"))"; exit 1; }
  image="$registry/service-provider-host:$version@$digest"
  sign_artifact "$registry/service-provider-host@$digest"
  echo "$image" >"$published/image"
  log "image index $image, signed"

  # The plugins, each signed twice before its component pins the signatures:
  # with the plugin key, which the host checks, and keyless.
  local landscape_refs=() entry name plugin component crds crd
  for entry in "${providers[@]}"; do
    name="${entry%%:*}"
    plugin="$("$host" plugin push "$out/$name.wasm" "oci://$registry/plugins/$name:$version" "${insecure[@]}")"
    plugin="${plugin#oci://}"
    if [ "$dry_run" = 1 ]; then
      sign_artifact "$plugin"
    else
      "$cosign" sign --key "$COSIGN_KEY" "${cosign_http[@]}" --yes "$plugin" >"$published/cosign.log" 2>&1 \
        || { cat "$published/cosign.log" >&2; exit 1; }
      sign_artifact "$plugin"
    fi
    echo "$plugin" >"$published/plugin-$name"
    component="$component_prefix/service-provider-$name"
    crds=()
    for crd in crds/"$name".services.open-control-plane.io_*.yaml; do
      [ -f "$crd" ] || { log "no CRDs of $name under crds/"; exit 1; }
      crds+=(--crd "$crd")
    done
    "$release" "${insecure[@]}" component "$registry/components//$component:$version" --image "$image" --plugin "$plugin" \
      "${crds[@]}" --plugin-verify-key "$published/cosign.pub" --sign-key "$OCM_KEY" >&2
    # Checked with the key landscapes trust, not one derived from the signing key.
    "$release" "${insecure[@]}" verify "$registry/components//$component:$version" --key "$OCM_PUBLIC_KEY"
  done

  # Every file of the forge release.
  local file
  for file in $(release_files); do
    sign_file "$out/$file"
  done
  rm -f "$published/cosign.log"
  log "published $version to $registry in $((SECONDS - started))s"
}

# --- verify: with public keys only ----------------------------------------------------
verify() {
  [ -n "$registry" ] || { log "$usage"; exit 1; }
  cosign="${COSIGN:-cosign}"
  set_insecure
  chmod +x "$built/release"
  local release="$built/release"
  local ocm_pub="${OCM_PUBLIC_KEY:-$published/ocm.pub}" plugin_pub="${COSIGN_PUBLIC_KEY:-$published/cosign.pub}"
  (cd "$out" && sha256sum --quiet -c SHA256SUMS) || { log "the files differ from SHA256SUMS"; exit 1; }

  # Who must have signed: in a dry run the throwaway key, unlogged; else the
  # workflow's identity, with the transparency log checked.
  local signer=()
  if [ "$dry_run" = 1 ]; then
    signer=(--key "$plugin_pub" --insecure-ignore-tlog=true)
  else
    : "${CERT_IDENTITY:?CERT_IDENTITY: the identity that signed, e.g. https://github.com/<owner>/<repo>/.github/workflows/release.yaml@refs/tags/v$version}"
    signer=(--certificate-identity "$CERT_IDENTITY"
      --certificate-oidc-issuer "${CERT_ISSUER:-https://token.actions.githubusercontent.com}")
  fi
  local file
  for file in $(release_files); do
    [ -f "$out/$file.sigstore.json" ] || { log "$file has no cosign bundle"; exit 1; }
    "$cosign" verify-blob "${signer[@]}" --bundle "$out/$file.sigstore.json" "$out/$file" >/dev/null 2>&1 \
      || { log "$file: its cosign bundle does not verify"; exit 1; }
  done
  local image
  image="$(cat "$published/image")"
  "$cosign" verify "${signer[@]}" "${cosign_http[@]}" "$registry/service-provider-host@${image##*@}" >/dev/null 2>&1 \
    || { log "the image index's signature does not verify"; exit 1; }
  local entry name plugin components=() landscape_refs=() key_check=()
  [ "$dry_run" = 1 ] && key_check=(--insecure-ignore-tlog=true)
  for entry in "${providers[@]}"; do
    name="${entry%%:*}"
    plugin="$(cat "$published/plugin-$name")"
    # The key the host checks, and the keyless signature.
    "$cosign" verify --key "$plugin_pub" "${key_check[@]}" "${cosign_http[@]}" "$plugin" >/dev/null 2>&1 \
      || { log "plugin $name: no signature by the plugin key"; exit 1; }
    "$cosign" verify "${signer[@]}" "${cosign_http[@]}" "$plugin" >/dev/null 2>&1 \
      || { log "plugin $name: its signature does not verify"; exit 1; }
    components+=("$registry/components//$component_prefix/service-provider-$name:$version")
    landscape_refs+=(--reference "service-provider-$name=$component_prefix/service-provider-$name:$version")
    "$release" "${insecure[@]}" verify "${components[-1]}" --key "$ocm_pub"
  done
  # An independent OCM implementation (third-party code from PyPI: no key here).
  local venv plain=()
  venv="$(bash scripts/cached-tool.sh pypi gardener-ocm 1.2863.0)"
  [ -z "${INSECURE:-}" ] || plain=(--plain-http)
  "$venv/bin/python" tools/release/check.py "${plain[@]}" --key "$ocm_pub" "${components[@]}" >&2

  # What a landscape's bootstrapper writes from these components: a root
  # component referencing them (a landscape has its own), then each
  # ServiceProvider and its platform CRDs.
  if [ "$dry_run" = 1 ]; then
    mkdir -p "$out/bootstrapper"
    local landscape="$registry/components//example.org/landscape/openmcp:$version"
    "$release" "${insecure[@]}" root "$landscape" "${landscape_refs[@]}" >&2
    for entry in "${providers[@]}"; do
      name="${entry%%:*}"
      "$release" "${insecure[@]}" service-provider "$landscape" --name "$name" --verify-key "$ocm_pub" \
        --crds-out "$out/bootstrapper/$name-crds" >"$out/bootstrapper/serviceprovider-$name.yaml"
    done
  fi
  log "verified $version in $registry"
}

# --- sdks: the SDKs to their registries, with their tokens only ----------------------
sdks() {
  # PUBLISH_SDKS=0 leaves them to a maintainer (the step then says what to run).
  if [ "${PUBLISH_SDKS:-1}" != 1 ]; then
    log "PUBLISH_SDKS=0: publish service-provider-sdk with cargo publish, and $out/open-control-plane-service-provider-sdk-$version.tgz with npm publish"
    return
  fi
  : "${CARGO_REGISTRY_TOKEN:?CARGO_REGISTRY_TOKEN: crates.io token to publish service-provider-sdk (or PUBLISH_SDKS=0)}"
  : "${NPM_TOKEN:?NPM_TOKEN: npm token to publish @open-control-plane/service-provider-sdk (or PUBLISH_SDKS=0)}"
  (cd "$out" && sha256sum --quiet -c SHA256SUMS) || { log "the files differ from SHA256SUMS"; exit 1; }
  # cargo packs the crate again from the tagged source and uploads it without
  # building it (--no-verify): the build phase built that package for
  # wasm32-wasip2, and no build script runs beside the token.
  cargo publish --no-verify --locked -p service-provider-sdk >&2
  # The npm package is the file built, checked and signed; no package script
  # runs. The token in a user config of its own, removed after.
  local npmrc
  npmrc="$(mktemp)"
  printf '//registry.npmjs.org/:_authToken=%s\n' "$NPM_TOKEN" >"$npmrc"
  npm publish --ignore-scripts --userconfig "$npmrc" --access public \
    "$out/open-control-plane-service-provider-sdk-$version.tgz" >&2 || { rm -f "$npmrc"; exit 1; }
  rm -f "$npmrc"
}

# --- a dry run: a local registry and throwaway keys --------------------------------------
registry_pid=
cleanup() { [ -z "$registry_pid" ] || kill "$registry_pid" 2>/dev/null || true; }
trap cleanup EXIT
dry_run_setup() {
  # cosign and the registry: Go builds, cached; a dry run builds and signs on one machine.
  eval "$(bash tests/testbed/scripts/build-flux-bins.sh)"
  cosign="${COSIGN:-$TESTBED_COSIGN}"
  export COSIGN="$cosign"
  local keys="$out/keys" port
  rm -rf "$keys" "$out/registry"
  mkdir -p "$keys" "$out/registry"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  registry="127.0.0.1:$port/service-provider-host"
  export INSECURE="127.0.0.1:$port"
  printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
    "$out/registry/data" "$port" >"$out/registry/config.yml"
  "$TESTBED_REGISTRY" serve "$out/registry/config.yml" >"$out/registry/log" 2>&1 &
  registry_pid=$!
  for _ in $(seq 100); do curl -sf "http://$INSECURE/v2/" >/dev/null && break; sleep 0.1; done
  curl -sf "http://$INSECURE/v2/" >/dev/null || { log "the local registry did not start: $(cat "$out/registry/log")"; exit 1; }
  (cd "$keys" && COSIGN_PASSWORD= "$cosign" generate-key-pair >/dev/null 2>&1)
  export COSIGN_KEY="$keys/cosign.key" COSIGN_PASSWORD=
  "$built/release" keygen --out "$keys"
  export OCM_KEY="$keys/ocm.key" OCM_PUBLIC_KEY="$keys/ocm.pub"
  log "dry run: registry $registry, throwaway keys in $keys"
}

case "$phase" in
  build) build ;;
  publish) publish ;;
  verify) verify ;;
  sdks) sdks ;;
  all)
    build
    if [ "$dry_run" = 1 ]; then
      dry_run_setup
    else
      [ -n "$registry" ] || { log "$usage"; exit 1; }
    fi
    publish
    verify
    if [ "$dry_run" != 1 ]; then
      sdks
      # The Go module proxy serves the Go SDK from this tag, once pushed.
      git tag -a "sdk-go/v$version" -m "Go SDK $version" 2>/dev/null || log "tag sdk-go/v$version exists"
    fi
    ;;
esac
