#!/usr/bin/env bash
# Long runs of the randomized cross-check against MPI (tests/mpi/test_crosscheck_mpi.cpp):
#   scripts/crosscheck.sh [N]      N random calls (default 1000) at 2, 3 and 4 ranks
# One seed serves the three sizes: TESSERA_TEST_SEED when set (to replay a run), else a fresh
# one, printed first and last. NPS="2 4" picks other sizes. Builds only the test binary (BUILD_DIR,
# CMAKE_ARGS, JOBS and SKIP_SETUP as in scripts/common.sh). Each size's output is kept in
# $BUILD_DIR/crosscheck/np<N>.log. Exit status: 0 when every size agreed with MPI.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

calls="${1:-1000}"
if ! [[ "$calls" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/crosscheck.sh [number of calls]" >&2
  exit 2
fi
seed="${TESSERA_TEST_SEED:-$(( ($(date +%s%N) / 1000) % 1000000000000 ))}"
nps="${NPS:-2 3 4}"
echo "crosscheck: seed $seed, $calls calls at ranks $nps (replay: TESSERA_TEST_SEED=$seed scripts/crosscheck.sh $calls)"

tessera_setup
tessera_configure
tessera_build --target test_crosscheck_mpi
exe="$BUILD_DIR/tests/mpi/test_crosscheck_mpi"
logs="$BUILD_DIR/crosscheck"
mkdir -p "$logs"

# As tests/CMakeLists.txt: Open MPI needs these to start more ranks than cores, as root, in a
# container; single-copy (CMA) is often refused there.
flags=()
if mpirun --version 2>&1 | grep -qE 'Open MPI|OpenRTE'; then
  flags=(--allow-run-as-root --oversubscribe --bind-to none)
fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
# Open MPI's AVX reductions saturate 8-bit integer sums (open-mpi/ompi#8045): the reference must
# wrap as C does.
export OMPI_MCA_op="${OMPI_MCA_op:-^avx}"
export TESSERA_TUNER_CACHE=0
# A rank whose call fails makes its peers fail within a minute instead of hanging.
export TESSERA_TRANSPORT_TIMEOUT="${TESSERA_TRANSPORT_TIMEOUT:-60}"
export TESSERA_TEST_SEED="$seed" TESSERA_CROSSCHECK_CALLS="$calls"

summary=()
status=0
for np in $nps; do
  start=$(date +%s)
  set +e
  mpirun "${flags[@]}" -np "$np" "$exe" 2>&1 | tee "$logs/np$np.log"
  rc=${PIPESTATUS[0]}
  set -e
  secs=$(( $(date +%s) - start ))
  if [[ $rc -eq 0 ]]; then
    summary+=("  np $np: agreed with MPI on $calls calls, $secs s")
  else
    status=1
    first=$(grep -m1 -A1 'crosscheck mismatch' "$logs/np$np.log" | tr '\n' ' ' || true)
    summary+=("  np $np: FAILED (exit $rc, $secs s) ${first:-see $logs/np$np.log}")
  fi
done

echo
echo "crosscheck summary: seed $seed, $calls calls per size"
printf '%s\n' "${summary[@]}"
echo "replay: TESSERA_TEST_SEED=$seed scripts/crosscheck.sh $calls"
exit $status
