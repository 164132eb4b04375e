#!/usr/bin/env bash
# The whole test suite from a fresh machine: the tree's own checks (no include reaches up a layer:
# scripts/check_layers.sh; every design citation names a section of docs/DESIGN.md:
# scripts/check_docs.sh; no CUDA call that waits for an idle device outside its allow-list:
# scripts/check_cuda_sync.sh), then install what is missing, configure, build, ctest. A failed check
# fails the run after ctest. Extra arguments go to ctest (e.g. scripts/test.sh -L unit).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

start=$(date +%s)
checks=0
"$ROOT/scripts/check_layers.sh" || checks=1
"$ROOT/scripts/check_docs.sh" || checks=1
"$ROOT/scripts/check_cuda_sync.sh" || checks=1
tessera_setup
tessera_configure
tessera_build
cd "$BUILD_DIR"
set +e
ctest --output-on-failure --parallel "$JOBS" --timeout 600 "$@"
rc=$?
set -e
echo "scripts/test.sh: ctest exit code $rc, wall time $(( $(date +%s) - start )) s"
if [[ $checks -ne 0 ]]; then
  echo "scripts/test.sh: a check of the tree failed (check_layers.sh, check_docs.sh or check_cuda_sync.sh, above)"
  [[ $rc -ne 0 ]] || rc=1
fi
exit $rc
