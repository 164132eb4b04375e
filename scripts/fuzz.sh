#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz: scripts/fuzz.sh TARGET SECONDS, or scripts/fuzz.sh all
# SECONDS (each target in turn). Extra arguments go to every libFuzzer run (e.g. -jobs=4).
#
# Builds the targets only, with clang, in their own folder (FUZZ_BUILD_DIR, default build-fuzz),
# then runs each for SECONDS on a scratch copy of tests/fuzz/corpus/TARGET
# (build-fuzz/fuzz-run/TARGET/corpus; the seeds in the repository are never written). Prints the
# executions of each target; exits non-zero when a target crashed, leaked, timed out or ran out of
# memory, and prints the path of the input that did it (reproduce: the binary with that path).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
  echo "usage: scripts/fuzz.sh TARGET|all SECONDS [libFuzzer flags...]" >&2
  echo "targets: $(targets | tr '\n' ' ')" >&2
  exit 2
}
targets() {
  for f in "$ROOT"/tests/fuzz/fuzz_*.cpp; do
    f=$(basename "$f" .cpp)
    echo "${f#fuzz_}"
  done
}

[[ $# -ge 2 ]] || usage
what=$1
seconds=$2
shift 2
[[ "$seconds" =~ ^[0-9]+$ ]] || usage
if [[ "$what" == all ]]; then
  list=$(targets)
else
  targets | grep -qx "$what" || usage
  list=$what
fi

for tool in clang clang++; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "scripts/fuzz.sh: $tool not found" \
      "(Debian: apt-get install -y clang libclang-rt-14-dev)" >&2
    exit 1
  fi
done

BUILD_DIR="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
start=$(date +%s)
CMAKE_ARGS="-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DTESSERA_FUZZ=ON \
  -DTESSERA_WITH_CUDA=OFF -DTESSERA_WITH_TORCH=OFF -DTESSERA_WITH_MPI=OFF -DTESSERA_WITH_UCX=OFF \
  -DTESSERA_BUILD_PERF=OFF ${CMAKE_ARGS:-}"
mkdir -p "$BUILD_DIR"
tessera_configure >"$BUILD_DIR/configure.log" 2>&1 || {
  cat "$BUILD_DIR/configure.log" >&2
  exit 1
}
binaries=()
for t in $list; do binaries+=("fuzz_$t"); done
tessera_build --target "${binaries[@]}"
built=$(date +%s)
echo "scripts/fuzz.sh: configured and built in $((built - start)) s"

failed=0
summary=""
for t in $list; do
  run="$BUILD_DIR/fuzz-run/$t"
  rm -rf "$run"
  mkdir -p "$run/corpus" "$run/artifacts"
  if [[ -d "$ROOT/tests/fuzz/corpus/$t" ]]; then
    cp -r "$ROOT/tests/fuzz/corpus/$t/." "$run/corpus/"
  fi
  log="$run/fuzz.log"
  echo "scripts/fuzz.sh: fuzz_$t for $seconds s (log: $log)"
  set +e
  # -timeout: an input slower than that is a hang; -rss_limit_mb / -malloc_limit_mb: a parser
  # that allocates that much for a few KiB of input is a finding too.
  "$BUILD_DIR/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 \
    -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -artifact_prefix="$run/artifacts/" "$@" "$run/corpus" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(find "$run/corpus" -type f | wc -l)
  line="fuzz_$t: ${execs:-?} executions (${rate:-?}/s), corpus $corpus inputs"
  if [[ $rc -ne 0 ]]; then
    failed=1
    line="$line, FAILED (exit $rc)"
    tail -n 60 "$log"
    for a in "$run"/artifacts/*; do
      [[ -e "$a" ]] && line="$line; input: $a (reproduce: $BUILD_DIR/tests/fuzz/fuzz_$t $a)"
    done
  fi
  echo "$line"
  summary+="$line"$'\n'
done

echo
echo "scripts/fuzz.sh summary (wall time $(($(date +%s) - start)) s):"
printf '%s' "$summary"
exit $failed
