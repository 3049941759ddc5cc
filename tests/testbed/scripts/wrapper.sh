# Shared by the build scripts that build Go binaries through wrapper
# modules (build-flux-bins.sh, build-openmcp-bins.sh); sourced, not run.
# The caller sets NAME (for log lines), HERE (tests/testbed), CACHE and
# REGEN before sourcing, and LDFLAGS per build if it needs other flags.
#
# Why wrapper modules: upstream modules with `replace` directives in their
# go.mod are refused by `go install pkg@version`. A small main module with a
# `tool` line and upstream's module-to-module replaces (local `./api`
# replaces are dropped: the published modules are used) builds the same
# binary, pinned by a committed go.sum. `--regen` rewrites the wrappers; a
# wrapper whose version differs from the requested one is regenerated.

export GOWORK=off
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

log() { echo "${NAME} [${SECONDS}s]: $*" >&2; }

command -v go >/dev/null || { log "go is not on PATH (Go >= 1.26 is required)"; exit 1; }

mod_field() { # module@version field
  go mod download -json "$1" | sed -n "s/^[[:space:]]*\"$2\": \"\(.*\)\",\{0,1\}$/\1/p"
}

wrapper_version() { # dir module -> version required in its go.mod ("" if none)
  [ -f "$1/go.mod" ] || return 0
  sed -n "s#^[[:space:]]*\(require[[:space:]]\{1,\}\)\{0,1\}$2[[:space:]]\{1,\}\(v[^[:space:]]*\).*#\2#p" "$1/go.mod" | head -n1
}

# Prints upstream's replaces whose target is a published module version, as
# `go mod edit -replace` arguments (old[@v]=new@v). Replaces pointing at local
# directories (`=> ./api`) are skipped.
module_replaces() { # path of an upstream go.mod
  sed -n 's#^[[:space:]]*\(replace[[:space:]]\{1,\}\)\{0,1\}\([^[:space:]()]\{1,\}\)\([[:space:]]\{1,\}\(v[^[:space:]]*\)\)\{0,1\}[[:space:]]\{1,\}=>[[:space:]]\{1,\}\([^.[:space:]][^[:space:]]*\)[[:space:]]\{1,\}\(v[^[:space:]]*\)[[:space:]]*$#\2@\4=\5@\6#p' "$1" |
    sed 's#@=#=#'
}

gen_wrapper() { # name module version package
  local name="$1" module="$2" version="$3" package="$4" dir="${HERE}/go/$1" up r gd
  log "generating ${name} wrapper module for ${module}@${version}"
  rm -f "${dir}/go.mod" "${dir}/go.sum"
  mkdir -p "${dir}"
  (
    cd "${dir}"
    go mod init "local/testbed/${name}" >/dev/null 2>&1
    go mod edit -go="${GO_DIRECTIVE}"
    up="$(mod_field "${module}@${version}" GoMod)"
    for r in $(module_replaces "$up"); do
      log "  replace ${r}"
      go mod edit -replace="$r"
    done
    gd="$(sed -n 's/^godebug[[:space:]]\{1,\}\(default=go[0-9.]*\)[[:space:]]*$/\1/p' "$up")"
    [ -z "$gd" ] || go mod edit -godebug="$gd"
    go get -tool "${package}@${version}" >&2
  )
}

# Holds the cache entry's lock for the rest of the calling (sub)shell, or
# of the script: a second run of the same build waits, then finds the
# binary (CI starts these builds in the background while `task test` may
# ask for them too).
lock_entry() { # name-version
  mkdir -p "${CACHE}"
  exec {lock_fd}>"${CACHE}/.$1.lock"
  flock "$lock_fd"
}

build() { # name module version package binary-name
  local name="$1" module="$2" version="$3" package="$4" out="${CACHE}/$1-$3" bin
  bin="${out}/$5"
  if [ -x "$bin" ] && [ "$REGEN" = 0 ]; then log "cache hit: $bin"; return 0; fi
  lock_entry "$1-$3"
  if [ -x "$bin" ] && [ "$REGEN" = 0 ]; then log "cache hit (built meanwhile): $bin"; return 0; fi
  if [ "$REGEN" = 1 ] || [ "$(wrapper_version "${HERE}/go/${name}" "$module")" != "$version" ]; then
    gen_wrapper "$name" "$module" "$version" "$package"
  fi
  mkdir -p "$out"
  log "building ${name} ${version} (cold: minutes on 2 cores)"
  local started=$SECONDS
  # No DWARF from the compiler: -s -w drops it from the binary anyway, and
  # not making it saves a tenth or more of a cold build (etcd, one after
  # the other with empty build caches: 42.2 s -> 37.4 s).
  (cd "${HERE}/go/${name}" && CGO_ENABLED=0 go build -trimpath -gcflags=all=-dwarf=false -ldflags "${LDFLAGS:--s -w}" -o "${bin}.tmp" "$package")
  mv -f "${bin}.tmp" "$bin" # atomic: an interrupted build never leaves a half binary
  log "built ${name} ${version} in $((SECONDS - started))s"
}

