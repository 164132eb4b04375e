#!/usr/bin/env bash
# The whole test suite from a fresh machine: the tree's own checks (no include reaches up a layer:
# scripts/check_layers.sh; every design citation names a section of docs/DESIGN.md:
# scripts/check_docs.sh; no CUDA call that waits for an idle device outside its allow-list:
# scripts/check_cuda_sync.sh), then install what is missing, configure, build, ctest. A failed check
# fails the run after ctest. Extra arguments go to ctest (e.g. scripts/test.sh -L unit).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

start=$(date +%s)
# Each phase's wall time, printed at the end (the README's budget for a fresh machine is checked
# against these: setup, configure, build, ctest).
phases=()
phase_start=$start
phase_done() {
  local now
  now=$(date +%s)
  phases+=("$(printf '%-10s %5d s' "$1" $(( now - phase_start )))")
  phase_start=$now
}
checks=0
"$ROOT/scripts/check_layers.sh" || checks=1
"$ROOT/scripts/check_docs.sh" || checks=1
"$ROOT/scripts/check_cuda_sync.sh" || checks=1
phase_done checks
tessera_setup
phase_done setup
tessera_configure
phase_done configure
tessera_build
phase_done build
cd "$BUILD_DIR"
set +e
ctest --output-on-failure --parallel "$JOBS" --timeout 600 "$@"
rc=$?
set -e
phase_done ctest
echo "scripts/test.sh: phases (wall time):"
printf '  %s\n' "${phases[@]}"
echo "scripts/test.sh: ctest exit code $rc, wall time $(( $(date +%s) - start )) s"
if [[ $checks -ne 0 ]]; then
  echo "scripts/test.sh: a check of the tree failed (check_layers.sh, check_docs.sh or check_cuda_sync.sh, above)"
  [[ $rc -ne 0 ]] || rc=1
fi
exit $rc
