#!/usr/bin/env bash
# Fails if an etcd or kube-apiserver started by the envtest harness is still
# running, i.e. one whose command line mentions the harness's run directory
# (ENVTEST_RUN_DIR, default ${TMPDIR:-/tmp}/service-provider-host-envtest).
# Call it after `cargo test` in CI.
#
# Usage: check-leftovers.sh [--kill]   (--kill: also SIGKILL what it finds; still exits 1)
set -euo pipefail

RUN_DIR="${ENVTEST_RUN_DIR:-${TMPDIR:-/tmp}}"
[ -n "${ENVTEST_RUN_DIR:-}" ] || RUN_DIR="${RUN_DIR%/}/service-provider-host-envtest"
KILL=0
[ "${1:-}" = "--kill" ] && KILL=1

find_leftovers() {
  local pid cmd
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    [ "$pid" = "$$" ] && continue
    cmd="$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null || true)"
    [ -n "$cmd" ] || continue   # kernel threads and zombies have no command line
    case "$cmd" in
      *etcd*"$RUN_DIR"*|*kube-apiserver*"$RUN_DIR"*) echo "$pid $cmd" ;;
    esac
  done
}

# Processes killed by PR_SET_PDEATHSIG when the test binary exited may take
# a moment to disappear: look a few times before failing.
for _ in 1 2 3 4 5 6 7 8 9 10; do
  found="$(find_leftovers)"
  [ -z "$found" ] && { echo "check-leftovers: no envtest server processes left (run dir $RUN_DIR)"; exit 0; }
  sleep 0.5
done

echo "check-leftovers: envtest server processes still running:" >&2
echo "$found" | cut -c1-300 >&2
if [ "$KILL" = 1 ]; then
  echo "$found" | while read -r pid _; do kill -9 "$pid" 2>/dev/null || true; done
fi
exit 1
