#!/usr/bin/env bash
# Fails if a server started by the test bed is still running: an etcd,
# kube-apiserver, source-controller, helm-controller, kustomize-controller or registry whose command
# line or environment mentions the harness's run directory (TESTBED_RUN_DIR,
# default ${TMPDIR:-/tmp}/service-provider-host-testbed). The Flux controllers
# get the run directory only through KUBECONFIG/HOME, hence the environment.
# Call it after `cargo test` in CI.
#
# Usage: check-leftovers.sh [--kill]   (--kill: also SIGKILL what it finds; still exits 1)
set -euo pipefail

RUN_DIR="${TESTBED_RUN_DIR:-${TMPDIR:-/tmp}}"
[ -n "${TESTBED_RUN_DIR:-}" ] || RUN_DIR="${RUN_DIR%/}/service-provider-host-testbed"
KILL=0
[ "${1:-}" = "--kill" ] && KILL=1

find_leftovers() {
  local pid cmd exe env
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    [ "$pid" = "$$" ] && continue
    cmd="$(tr '\0' ' ' 2>/dev/null <"$d/cmdline" || true)"
    [ -n "$cmd" ] || continue   # kernel threads and zombies have no command line
    exe="${cmd%% *}"
    case "${exe##*/}" in
      etcd|kube-apiserver|source-controller|helm-controller|kustomize-controller|registry|jaeger) ;;
      *) continue ;;
    esac
    case "$cmd" in
      *"$RUN_DIR"*) echo "$pid $cmd"; continue ;;
    esac
    env="$(tr '\0' '\n' 2>/dev/null <"$d/environ" || true)"
    case "$env" in
      *"=$RUN_DIR/"*) echo "$pid $cmd (environment mentions $RUN_DIR)" ;;
    esac
  done
}

# Processes killed by PR_SET_PDEATHSIG when the test binary exited may take
# a moment to disappear: look a few times before failing.
for _ in 1 2 3 4 5 6 7 8 9 10; do
  found="$(find_leftovers)"
  [ -z "$found" ] && { echo "check-leftovers: no test bed server processes left (run dir $RUN_DIR)"; exit 0; }
  sleep 0.5
done

echo "check-leftovers: test bed server processes still running:" >&2
echo "$found" | cut -c1-300 >&2
if [ "$KILL" = 1 ]; then
  echo "$found" | while read -r pid _; do kill -9 "$pid" 2>/dev/null || true; done
fi
exit 1
