#!/usr/bin/env bash
# The whole test suite from a fresh machine: install what is missing, configure, build, ctest.
# Extra arguments go to ctest (e.g. scripts/test.sh -L unit).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

start=$(date +%s)
tessera_setup
tessera_configure
tessera_build
cd "$BUILD_DIR"
set +e
ctest --output-on-failure --parallel "$JOBS" --timeout 600 "$@"
rc=$?
set -e
echo "scripts/test.sh: ctest exit code $rc, wall time $(( $(date +%s) - start )) s"
exit $rc
