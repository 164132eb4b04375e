#!/usr/bin/env bash
# The long soak (issue 16): scripts/soak.sh [CALLS] (default 100000) builds tessera_soak and runs
# CALLS random calls on NP (default 4) process ranks, with no time limit, then prints the table:
# calls, seconds, calls/s, resident memory after the warm-up and at the end, descriptors, /dev/shm
# entries and the ops drawn (tests/soak/soak.cpp). ctest runs the 2-minute version (label soak).
# TESSERA_TEST_SEED replays a run; TESSERA_SOAK_SECONDS bounds it by time as well.
# Honors BUILD_DIR, CMAKE_ARGS, JOBS and SKIP_SETUP as scripts/test.sh does.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

calls="${1:-100000}"
start=$(date +%s)
tessera_setup
tessera_configure
tessera_build --target tessera_soak

flags=()
if mpirun --version 2>/dev/null | grep -q "Open MPI"; then
  flags=(--allow-run-as-root --oversubscribe --bind-to none)
fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export TESSERA_TUNER_CACHE=0  # plans as in the tests, whatever ran on this machine before
export TESSERA_TRANSPORT_TIMEOUT="${TESSERA_TRANSPORT_TIMEOUT:-60}"  # a failed rank ends it soon
export TESSERA_SOAK_CALLS="$calls"
export TESSERA_SOAK_SECONDS="${TESSERA_SOAK_SECONDS:-0}"

run_start=$(date +%s)
set +e
mpirun "${flags[@]}" -np "${NP:-4}" "$BUILD_DIR/tests/soak/tessera_soak"
rc=$?
set -e
end=$(date +%s)
echo "scripts/soak.sh: exit code $rc, soak wall time $(( end - run_start )) s" \
     "(with the build $(( end - start )) s)"
exit $rc
