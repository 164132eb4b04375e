#!/usr/bin/env bash
# The one script for a machine with an NVIDIA GPU (DESIGN.md, "Testing"). It needs only CUDA and
# CMake there: MPI, UCX and hwloc are detected and skipped when absent, and GoogleTest is built
# from a source folder carried with the call (default: .gtest/ in the repo root, a copy of
# /usr/src/googletest made where Debian's googletest package is installed:
#   cp -r /usr/src/googletest .gtest
# then carry ".gtest"), and the CUTLASS headers from .cutlass/ for the fused kernels:
#   cp -r "$(python3 -c 'import importlib.util as u; print(list(u.find_spec("cutlass_library").submodule_search_locations)[0])')/source/include" .cutlass
# then carry ".cutlass" too (both folders are in .gitignore).
#
# It builds what the GPU steps need, prints tessera_info (and stops if it sees no GPU), runs the
# gpu-labelled tests (a skipped one fails the run: on a GPU machine a skip is a finding), prints
# the put bandwidth of cuda_ipc and p2p beside a plain device-to-device cudaMemcpy of the same
# size (perf/gpu_transport_bw.cpp), then builds the rest and runs the host-only unit tests last,
# so a slow unit run cannot cost the GPU figures. Between them, one table of the device executor's
# figures (thread ranks sharing GPU 0, the perf binaries with -m device): busbw and its ratio to the
# D2D copy, 8-byte all-reduce latency in persistent and launch mode, and a CUDA-graph replay. Each log is copied to $OUT (when the device
# tool sets it) as soon as its step ends. Then the fused GEMM+ReduceScatter figures (fused_perf -d
# device, bf16, M = N = 8192, K = 2048 per rank): fused / (cuBLAS GEMM + tessera reduce-scatter)
# and the overlap efficiency on 4 ranks, the fused GEMM beside cuBLAS on 1 rank, and the M sweep
# (128 to 16384) as JSON. Then the PyTorch backend's CUDA tests and a short CUDA-tensor
# torch_bench.py run, where python3 has torch with CUDA; then the NCCL drop-in (its tests,
# nccl-tests' all_reduce_perf over it from a carried .nccl-tests/, ProcessGroupNCCL preloaded).
# Keep it under ten minutes on an H100/H200-class GPU.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
GTEST_SRC="${TESSERA_GTEST_SOURCE_DIR:-$ROOT/.gtest}"
# CUTLASS headers for the fused kernels: a folder holding cutlass/ and cute/ (the device machine has
# no package index, so it travels with the call as .cutlass, copied from the nvidia-cutlass
# package's cutlass_library/source/include); without it the fused rows fail, saying so.
CUTLASS_INC="${TESSERA_CUTLASS_DIR:-$ROOT/.cutlass}"
[[ -d "$CUTLASS_INC" ]] || CUTLASS_INC=""
ARCHS="${TESSERA_CUDA_ARCHS:-90}"
# Per gpu test, in seconds. The tests' TIMEOUT property (TESSERA_TEST_TIMEOUT, a plain variable
# in tests/CMakeLists.txt) wins over `ctest --timeout`, so each test runs under timeout(1).
GPU_TEST_SECONDS="${GPU_TEST_SECONDS:-120}"
# The gpu test binaries (tests/gpu/CMakeLists.txt) and the tools the GPU steps run.
GPU_TARGETS=(tessera_info test_gpu_convert test_gpu_comm test_gpu_p2p test_gpu_cuda_ipc
  test_gpu_coll test_gpu_coll_stream test_gpu_fused gpu_transport_bw bootstrap_perf all_gather_perf
  reduce_scatter_perf all_reduce_perf fused_perf)
# The device executor's hazards (README, "Device executor"): more hardware queues than streams,
# so that no stream shares the resident kernels' queues, and kernels loaded at start, so that no
# lazy module load waits for a device the resident kernels keep busy.
export CUDA_DEVICE_MAX_CONNECTIONS="${CUDA_DEVICE_MAX_CONNECTIONS:-32}"
export CUDA_MODULE_LOADING="${CUDA_MODULE_LOADING:-EAGER}"
start=$(date +%s)
step() { echo; echo "=== $* ($(( $(date +%s) - start )) s)"; }
# Copies files to $OUT when the device tool set it (missing files are skipped).
keep() {
  [[ -n "${OUT:-}" && -d "${OUT:-}" ]] || return 0
  local f
  for f in "$@"; do [[ -f "$f" ]] && cp "$f" "$OUT/"; done
  return 0
}

step "tools"
cmake --version | head -1
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,compute_mode,driver_version --format=csv
else
  echo "nvidia-smi: not found"
fi

step "configure (CUDA archs $ARCHS)"
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTESSERA_WITH_CUDA=ON \
  -DTESSERA_CUDA_ARCHS="$ARCHS" -DTESSERA_GTEST_SOURCE_DIR="$GTEST_SRC" \
  ${CUTLASS_INC:+-DTESSERA_CUTLASS_DIR="$CUTLASS_INC"} || exit 1

step "build (GPU targets: ${GPU_TARGETS[*]})"
cmake --build "$BUILD" --parallel "$(nproc)" --target "${GPU_TARGETS[@]}" || exit 1

step "tessera_info"
"$BUILD/src/tools/tessera_info" | tee "$BUILD/tessera_info.txt"
keep "$BUILD/tessera_info.txt"
# A device line reads "  [0] <name>  bus ..."; without one nothing below would run on a GPU.
gpus=$(grep -c '^  \[[0-9]*\] ' "$BUILD/tessera_info.txt")
if [[ $gpus -eq 0 ]]; then
  echo "FAIL: tessera_info lists no usable CUDA device (see its \"CUDA devices\" section above)"
  exit 1
fi

step "gpu tests (each at most $GPU_TEST_SECONDS s)"
: >"$BUILD/gpu.log"
: >"$BUILD/LastTest.log"
gpu_rc=0
mapfile -t gpu_tests < <(cd "$BUILD" && ctest -N -L gpu | sed -n 's/^ *Test *#[0-9]*: //p')
if [[ ${#gpu_tests[@]} -eq 0 ]]; then
  echo "FAIL: ctest lists no gpu-labelled test" | tee -a "$BUILD/gpu.log"
  gpu_rc=1
fi
for t in "${gpu_tests[@]}"; do
  re="^$(printf '%s' "$t" | sed 's/[][\.*^$+?()|]/\\&/g')\$"
  (cd "$BUILD" && timeout -k 10 "$GPU_TEST_SECONDS" ctest -R "$re" --output-on-failure 2>&1) \
    | tee -a "$BUILD/gpu.log"
  rc=${PIPESTATUS[0]}
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    echo "FAIL: $t did not finish within $GPU_TEST_SECONDS s" | tee -a "$BUILD/gpu.log"
  fi
  [[ $rc -ne 0 ]] && gpu_rc=1
  cat "$BUILD/Testing/Temporary/LastTest.log" >>"$BUILD/LastTest.log" 2>/dev/null
done
# A skipped gpu test on a GPU machine is a failure: say which, and why. Only the tests that need
# several GPUs (*.SeparateGpus) may skip, where there is one.
skip_ok='^$'
[[ $gpus -lt 2 ]] && skip_ok='\.SeparateGpus '
grep '\*\*\*Skipped' "$BUILD/gpu.log" | grep -v -- "$skip_ok" >"$BUILD/gpu_skipped.txt"
skipped=$(wc -l <"$BUILD/gpu_skipped.txt")
if [[ $skipped -gt 0 ]]; then
  echo "FAIL: $skipped gpu test(s) skipped on a machine with $gpus GPU(s):" | tee -a "$BUILD/gpu.log"
  cat "$BUILD/gpu_skipped.txt"
  grep -h 'Skipped\|SKIPPED\|no usable GPU\|needs two' "$BUILD/LastTest.log" | sort | uniq -c | head
  gpu_rc=1
fi
keep "$BUILD/gpu.log" "$BUILD/LastTest.log"

step "GPU transport put bandwidth beside cudaMemcpy D2D (GPU 0; cuda_ipc: 2 processes, p2p: 2 threads)"
timeout -k 10 300 "$BUILD/perf/gpu_transport_bw" -d 0,0 -i 20 -m 256 2>&1 \
  | tee "$BUILD/gpu_transport_bw.txt"
bw_rc=${PIPESTATUS[0]}
keep "$BUILD/gpu_transport_bw.txt"

step "device executor figures (thread ranks sharing GPU 0, 256 MiB, -m device)"
# The perf binaries' rows: size count type redop root, then out of place: time(us) algbw busbw.
# The D2D copy: gpu_transport_bw's cudaMemcpy GB/s at 256 MiB (bytes copied), read + written = 2x.
# Traffic of n ranks for a collective of S bytes (all-gather, reduce-scatter: every rank reads and
# writes S(n-1)/n; all-reduce twice that): 2 n busbw per second, so ratio = 2 n busbw / copy.
PERF="$BUILD/perf"
FIG="$BUILD/device_figures.txt"
: >"$FIG"
copy_rw=$(awk '$1 == "p2p" && $3 == 268435456 { v = 2 * $5 } END { if (v) print v }' \
  "$BUILD/gpu_transport_bw.txt")
fig_rc=0
# Runs one perf binary under a timeout; sets t and bw from its first data row (out of place).
perf_row() {
  local out rc
  t="" bw=""
  echo "\$ $*" >>"$BUILD/device_perf.log"
  out=$(timeout -k 10 120 "$@" 2>&1)
  rc=$?
  echo "$out" >>"$BUILD/device_perf.log"
  if [[ $rc -ne 0 ]]; then
    echo "FAIL (exit $rc, see device_perf.log): ${*##*/}" >>"$FIG"
    fig_rc=1
    return
  fi
  read -r t bw < <(echo "$out" | awk '$1 ~ /^[0-9]+$/ && NF >= 8 { print $6, $8; exit }')
}
: >"$BUILD/device_perf.log"
{
  printf '%-34s %12s %12s %8s\n' "figure" "time" "GB/s" "ratio"
  printf '%-34s %12s %12s %8s\n' "D2D cudaMemcpy, read + written" "" "${copy_rw:-?}" "1.00"
} >>"$FIG"
big=(-b 256M -e 256M -n 10 -w 3 -c 0 -m device)
for coll in all_gather reduce_scatter all_reduce; do
  for n in 2 4 8; do
    perf_row "$PERF/${coll}_perf" "${big[@]}" -t "$n"
    ratio=$(awk -v b="${bw:-0}" -v n="$n" -v c="${copy_rw:-0}" \
      'BEGIN { if (c > 0 && b > 0) printf "%.2f", 2 * n * b / c; else print "?" }')
    printf '%-34s %10sus %12s %8s\n' "$coll busbw, $n ranks" "${t:-?}" "${bw:-?}" "$ratio" >>"$FIG"
  done
done
for coll in all_gather reduce_scatter; do
  printf '%-34s %12s %12s %8s\n' "$coll -R 1 (registered), 4 ranks" "" \
    "not implemented" "" >>"$FIG"
done
small=(-b 8 -e 8 -n 1000 -w 100 -c 0 -m device -t 8)
perf_row "$PERF/all_reduce_perf" "${small[@]}"
tp=$t
perf_row env TESSERA_LAUNCH=kernel "$PERF/all_reduce_perf" "${small[@]}"
tk=$t
perf_row "$PERF/all_reduce_perf" -b 8 -e 8 -n 100 -G 10 -w 10 -c 0 -m device -t 8
tg=$t
pk=$(awk -v p="${tp:-0}" -v k="${tk:-0}" 'BEGIN { if (p > 0 && k > 0) printf "%.2f", p / k; else print "?" }')
{
  printf '%-34s %10sus %12s %8s\n' "8 B all-reduce, 8 ranks, persistent" "${tp:-?}" "" "$pk"
  printf '%-34s %10sus %12s %8s\n' "8 B all-reduce, 8 ranks, launch" "${tk:-?}" "" "1.00"
  printf '%-34s %10sus %12s %8s\n' "graph of 100 8 B all-reduces, 8 r" "${tg:-?}" "" "per call"
} >>"$FIG"
# fused_perf's data row: M N K ranks fused(us) gemm+coll(us) gemm(us) coll(us) f/(g+c) overlap
# f/gemm err. Sets ft, fr (fused / (gemm + coll)), fo (overlap), fg (fused / gemm) from the first
# row; a skip or a failure is a failed figure (on a GPU machine the fused kernels must run).
fused_row() {
  local out rc
  ft="" fr="" fo="" fg=""
  echo "\$ $*" >>"$BUILD/device_perf.log"
  out=$(timeout -k 10 180 "$@" 2>&1)
  rc=$?
  echo "$out" >>"$BUILD/device_perf.log"
  if [[ $rc -ne 0 ]] || ! grep -q 'every fused result agrees' <<<"$out"; then
    echo "FAIL (exit $rc, see device_perf.log): ${*##*/}" >>"$FIG"
    grep -m1 'skipped\|ERROR\|WRONG' <<<"$out" >>"$FIG"
    fig_rc=1
    return
  fi
  read -r ft fr fo fg < <(awk '$1 ~ /^[0-9]+$/ && NF >= 12 { print $5, $9, $10, $11; exit }' \
    <<<"$out")
}
# A row of the table: figure, time in us (may be empty), ratio.
fig_line() {
  printf '%-34s %12s %12s %8s\n' "$1" "${2:+${2}us}" "" "$3" >>"$FIG"
}
fused=("$PERF/fused_perf" -d device -O rs -t bf16 -M 8192 -N 8192 -K 2048 -i 10 -w 3)
fused_row "${fused[@]}" -n 4
fig_line "fused GEMM+RS / (cuBLAS + RS), 4 r" "${ft:-?}" "${fr:-?}"
fig_line "fused GEMM+RS overlap eff., 4 r" "" "${fo:-?}"
fused_row "${fused[@]}" -n 1
fig_line "fused GEMM / cuBLAS GEMM, 1 rank" "${ft:-?}" "${fg:-?}"
# The whole M sweep (decode-sized M included), kept as JSON beside the log.
fused_row "$PERF/fused_perf" -d device -O rs -t bf16 -n 4 -i 5 -w 2 -J "$BUILD/fused_sweep.json"
fig_line "fused sweep M 128..16384, 4 r" "" "$([[ -n "$ft" ]] && echo json || echo FAIL)"
cat "$FIG"
keep "$FIG" "$BUILD/device_perf.log" "$BUILD/fused_sweep.json"

# The PyTorch backend on CUDA tensors (README, "PyTorch"), where the machine's Python has torch
# with CUDA and pytest: tests/torch/test_cuda.py, then perf/torch_bench.py --device cuda at small
# scale (one GPU: the baseline is Gloo on the same CUDA tensors, NCCL refusing two ranks per GPU).
step "PyTorch backend on CUDA tensors"
torch_rc=0
if python3 -c 'import torch, pytest, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
    2>/dev/null; then
  torch_rc=1
  if cmake --build "$BUILD" --target tessera_torch >"$BUILD/torch.log" 2>&1; then
    (cd "$ROOT/tests/torch" && PYTHONPATH="$BUILD/python:$ROOT/tests/torch" \
      timeout -k 10 300 python3 -m pytest -q -rs -p no:cacheprovider test_cuda.py) \
      >>"$BUILD/torch.log" 2>&1
    torch_rc=$?
    PYTHONPATH="$BUILD/python" timeout -k 10 240 python3 "$ROOT/perf/torch_bench.py" \
      --device cuda -n 2 --launches 1 --rounds 2 --scale 0.25 --ddp-steps 3 \
      --json "$BUILD/torch_cuda.json" >>"$BUILD/torch.log" 2>&1 || torch_rc=1
  fi
  tail -60 "$BUILD/torch.log"
else
  echo "skipped: python3 here has no torch with CUDA, or no pytest"
fi
keep "$BUILD/torch.log" "$BUILD/torch_cuda.json"

# The NCCL drop-in (README, "NCCL drop-in") where configure built it: its tests, nccl-tests'
# all_reduce_perf built against it from a source folder carried with the call (default
# .nccl-tests/, a clone of github.com/NVIDIA/nccl-tests; never committed), and PyTorch's
# ProcessGroupNCCL with the drop-in preloaded.
step "NCCL drop-in: its tests, nccl-tests, ProcessGroupNCCL"
nccl_rc=0
NCCL_TESTS_DIR="${NCCL_TESTS_DIR:-$ROOT/.nccl-tests}"
if cmake --build "$BUILD" --target tessera_nccl test_nccl_threads >"$BUILD/nccl.log" 2>&1; then
  SHIM="$BUILD/nccl/libnccl.so.2"
  (cd "$BUILD" && timeout -k 10 300 ctest -R '^nccl\.' --timeout 120) >>"$BUILD/nccl.log" 2>&1 || nccl_rc=1
  if [[ -d "$NCCL_TESTS_DIR/src" ]]; then
    # nvcc puts the toolkit's library folder (which may hold NVIDIA's libnccl) first: link through
    # a folder holding only the drop-in and cudart.
    home="$BUILD/nccl-home"
    mkdir -p "$home/lib"
    cuda_home=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
    ln -sfn "$(cat "$BUILD/nccl/include_dir.txt")" "$home/include"  # the nccl.h the shim used
    ln -sf "$SHIM" "$home/lib/libnccl.so"
    ln -sf "$cuda_home/lib64/libcudart.so" "$home/lib/libcudart.so"
    if make -C "$NCCL_TESTS_DIR" -j"$(nproc)" NCCL_HOME="$home" CUDA_HOME="$cuda_home" \
        CUDA_LIB="$home/lib" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
        BUILDDIR="$BUILD/nccl-tests" >>"$BUILD/nccl.log" 2>&1; then
      for t in 1 2 4; do
        LD_LIBRARY_PATH="$BUILD/nccl:$LD_LIBRARY_PATH" NCCL_DEBUG=VERSION timeout -k 10 120 \
          "$BUILD/nccl-tests/all_reduce_perf" -b 8 -e 256M -f 4 -g 1 -t "$t" \
          >>"$BUILD/nccl.log" 2>&1 || nccl_rc=1
      done
    else
      echo "nccl-tests did not build against the drop-in" >>"$BUILD/nccl.log"
      nccl_rc=1
    fi
  else
    echo "skipped nccl-tests: no $NCCL_TESTS_DIR (carry a clone of NVIDIA/nccl-tests)" >>"$BUILD/nccl.log"
  fi
  if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    LD_PRELOAD="$SHIM" timeout -k 10 180 python3 "$ROOT/tests/nccl/torch_pg_nccl.py" 2 \
      >>"$BUILD/nccl.log" 2>&1 || nccl_rc=1
  fi
else
  echo "skipped: configure did not build the NCCL drop-in (see its summary)" >>"$BUILD/nccl.log"
fi
tail -80 "$BUILD/nccl.log"
keep "$BUILD/nccl.log"

step "bootstrap smoke benchmark (4 ranks)"
timeout -k 10 120 "$BUILD/perf/bootstrap_perf" -n 4 -i 10

# Host-only (CI runs them too): last, so they cannot cost the GPU figures above.
step "build the rest, unit tests"
unit_rc=1
if cmake --build "$BUILD" --parallel "$(nproc)"; then
  (cd "$BUILD" && timeout -k 10 300 ctest -L unit --parallel "$(nproc)" --timeout 300 \
    >"$BUILD/unit.log" 2>&1)
  unit_rc=$?
  tail -15 "$BUILD/unit.log"
fi
keep "$BUILD/unit.log"

step "done: gpu tests rc=$gpu_rc, bandwidth rc=$bw_rc, device figures rc=$fig_rc, torch rc=$torch_rc, nccl rc=$nccl_rc, unit tests rc=$unit_rc"
[[ $gpu_rc -eq 0 && $bw_rc -eq 0 && $fig_rc -eq 0 && $torch_rc -eq 0 && $nccl_rc -eq 0 && $unit_rc -eq 0 ]]
