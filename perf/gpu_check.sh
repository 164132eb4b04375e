#!/usr/bin/env bash
# The one script for a machine with an NVIDIA GPU (DESIGN.md, "Testing"). It needs only CUDA and
# CMake there: MPI, UCX and hwloc are detected and skipped when absent, and GoogleTest is built
# from a source folder carried with the call (default: .gtest/ in the repo root, a copy of
# /usr/src/googletest made where Debian's googletest package is installed:
#   cp -r /usr/src/googletest .gtest && echo /.gtest/ >> .git/info/exclude
# then carry ".gtest").
#
# It builds, prints tessera_info, runs the gpu-labelled tests and the unit tests, and prints the
# put bandwidth of cuda_ipc and p2p beside a plain device-to-device cudaMemcpy of the same size
# (perf/gpu_transport_bw.cpp); logs go to $OUT when the device tool sets it. Keep it under eight
# minutes on an H100/H200-class GPU.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
GTEST_SRC="${TESSERA_GTEST_SOURCE_DIR:-$ROOT/.gtest}"
ARCHS="${TESSERA_CUDA_ARCHS:-90}"
start=$(date +%s)
step() { echo; echo "=== $* ($(( $(date +%s) - start )) s)"; }

step "configure (CUDA archs $ARCHS)"
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTESSERA_WITH_CUDA=ON \
  -DTESSERA_CUDA_ARCHS="$ARCHS" -DTESSERA_GTEST_SOURCE_DIR="$GTEST_SRC" || exit 1

step "build"
cmake --build "$BUILD" --parallel "$(nproc)" || exit 1

step "tessera_info"
"$BUILD/src/tools/tessera_info"

step "gpu tests"
(cd "$BUILD" && ctest -L gpu --output-on-failure --timeout 300 2>&1 | tee "$BUILD/gpu.log")
gpu_rc=${PIPESTATUS[0]}
# Which gpu tests skipped, and why (a skip on a GPU machine is a finding, not a pass).
grep -h -A1 "Skipped$" "$BUILD"/Testing/Temporary/LastTest.log 2>/dev/null | grep "no usable GPU\|needs" \
  | sort | uniq -c | head -5

step "unit tests"
(cd "$BUILD" && ctest -L unit --parallel "$(nproc)" --timeout 300 >"$BUILD/unit.log" 2>&1)
unit_rc=$?
tail -15 "$BUILD/unit.log"

step "bootstrap smoke benchmark (4 ranks)"
"$BUILD/perf/bootstrap_perf" -n 4 -i 10

step "GPU transport put bandwidth beside cudaMemcpy D2D (GPU 0; cuda_ipc: 2 processes, p2p: 2 threads)"
timeout 300 "$BUILD/perf/gpu_transport_bw" -d 0,0 -i 20 -m 256 | tee "$BUILD/gpu_transport_bw.txt"
bw_rc=${PIPESTATUS[0]}

# Where the device tool collects files ($OUT), keep the logs.
if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
  cp "$BUILD/gpu.log" "$BUILD/unit.log" "$BUILD/gpu_transport_bw.txt" "$OUT/" 2>/dev/null
  cp "$BUILD/Testing/Temporary/LastTest.log" "$OUT/LastTest.log" 2>/dev/null
fi

step "done: gpu tests rc=$gpu_rc, unit tests rc=$unit_rc, bandwidth rc=$bw_rc"
[[ $gpu_rc -eq 0 && $unit_rc -eq 0 && $bw_rc -eq 0 ]]
