#!/usr/bin/env bash
# The one script for a machine with an NVIDIA GPU (DESIGN.md, "Testing"), in stages, each with a
# time budget and a switch to skip it, so that a lent GPU's minutes go where they count:
#
#   probe       driver, CUDA, compute mode, MPS, descriptor limit, nvidia-smi, tessera_info (~10 s)
#   correct     the blocking probe (which CUDA calls block while a kernel runs), then every gpu
#               test, one gtest test per process under its own timeout: device kernels, transports
#               (p2p threads; cuda_ipc processes, under MPS too where the machine has it), the
#               device executor (1/2/4/8 thread ranks, persistent and launch mode, every collective
#               x type x op against the host executor), graphs, send/recv, abort
#   figures     cuda_ipc/p2p put bandwidth beside cudaMemcpy; all-gather, reduce-scatter and
#               all-reduce busbw at 256 MiB on 2/4/8 thread ranks as a fraction of the D2D copy's
#               traffic; 8 B all-reduce per call (persistent, launch, replayed graph)
#   fused       the fused GEMM tests against cuBLAS, then fused_perf: GEMM+RS at M=N=8192, K=2048
#               (bf16, 4 ranks) against cuBLAS + tessera's reduce-scatter, n=1 against cuBLAS, the
#               M sweep
#   frameworks  the NCCL drop-in (its tests; nccl-tests over it; ProcessGroupNCCL preloaded) and
#               the PyTorch backend on CUDA tensors (built there against that machine's torch)
#   model       tessera_sim's compute model: its GEMM and memory-bound ops timed alone, and a GPT
#               layer run by PyTorch (perf/gpu_model_check.py; bundle mode, ~30 s)
#   unit        (build mode only) the host unit tests, last
#
# Two ways to get the binaries:
#   --bundle DIR   what scripts/gpu_bundle.sh packed here (no compiler time on the GPU machine)
#   (default)      build on this machine with CUDA and CMake only (ninja -k 0: a target that fails,
#                  the CUTLASS kernels say, leaves the others; the stages report what is missing)
#
#   perf/gpu_check.sh --bundle .gpu-bundle --skip frameworks
#   GPU_CHECK_BUDGET_correct=400 perf/gpu_check.sh --only probe,correct
#
# Every stage's log goes to $OUT (the device tool's folder; else $BUILD/gpu-check) as it is
# written: probe.log, correct.log, figures.log, fused.log, frameworks.log, model.log (and
# model_measured.json), unit.log, and
# summary.txt (one line per test and figure: what ran, its result, its time). A test that does not
# finish in its timeout is killed and reported; a stage whose budget is spent reports the rest as
# not run. A skipped gpu test is a failure on a GPU machine (but *.SeparateGpus on one GPU).
# Exit code: 0 when every test that ran passed and every figure was measured.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
BUNDLE=""
ONLY=""
SKIP="${GPU_CHECK_SKIP:-}"
LAUNCHES="${GPU_CHECK_LAUNCHES:-3}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle) BUNDLE="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --skip) SKIP="$2"; shift 2 ;;
    --launches) LAUNCHES="$2"; shift 2 ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
# Budgets in seconds per stage (GPU_CHECK_BUDGET_<stage> overrides).
declare -A BUDGET=([probe]=20 [correct]=330 [figures]=200 [fused]=150 [frameworks]=240 [model]=90 [unit]=300)
for s in "${!BUDGET[@]}"; do
  v="GPU_CHECK_BUDGET_$s"
  [[ -n "${!v:-}" ]] && BUDGET[$s]="${!v}"
done
LOGS="${OUT:-$BUILD/gpu-check}"
mkdir -p "$LOGS"
SUMMARY="$LOGS/summary.txt"
: >"$SUMMARY"
start=$(date +%s)
failures=0

# The device executor's hazards (README, "Device executor"): more hardware queues than streams, so
# that no stream shares a resident kernel's queue, and kernels loaded at start, so that no lazy
# module load waits for a device the resident kernels keep busy. Many ranks, many descriptors.
export CUDA_DEVICE_MAX_CONNECTIONS="${CUDA_DEVICE_MAX_CONNECTIONS:-32}"
export CUDA_MODULE_LOADING="${CUDA_MODULE_LOADING:-EAGER}"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || ulimit -n 65536 2>/dev/null || true

enabled() {
  local s=$1
  [[ -n "$ONLY" && ",$ONLY," != *",$s,"* ]] && return 1
  [[ ",$SKIP," == *",$s,"* ]] && return 1
  return 0
}
elapsed() { echo $(( $(date +%s) - start )); }
STAGE="" STAGE_END=0 LOG=/dev/null
stage_begin() {
  STAGE=$1
  STAGE_END=$(( $(date +%s) + BUDGET[$1] ))
  LOG="$LOGS/$1.log"
  : >"$LOG"
  echo
  echo "=== $1 (budget ${BUDGET[$1]} s; $(elapsed) s since start)" | tee -a "$LOG"
}
left() { echo $(( STAGE_END - $(date +%s) )); }
# One summary line: stage, name, result, seconds, note.
record() {
  printf '%-10s %-64s %-9s %7s  %s\n' "$STAGE" "$2" "$1" "$3" "${4:-}" | tee -a "$SUMMARY"
  case "$1" in PASS|ok|SKIP-OK) ;; *) failures=$((failures + 1)) ;; esac
}
# Runs a command under the stage's remaining time (at most $1 seconds), output to the stage log.
# Sets RC and SECS.
timed() {
  local limit=$1
  shift
  local l
  l=$(left)
  [[ $l -lt $limit ]] && limit=$l
  echo "\$ $*" >>"$LOG"
  local t0
  t0=$(date +%s.%N)
  if [[ $limit -lt 3 ]]; then
    RC=125 SECS=0
    echo "(not run: the stage's budget is spent)" >>"$LOG"
    return
  fi
  timeout -k 5 "$limit" "$@" >>"$LOG" 2>&1
  RC=$?
  SECS=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}

# --- the binaries ------------------------------------------------------------------------------
BIN="$BUILD/gpu-bin"
if [[ -n "$BUNDLE" ]]; then
  BUNDLE="$(cd "$BUNDLE" && pwd)"
  BIN="${TMPDIR:-/tmp}/tessera-bundle/bin"
  rm -rf "${BIN%/bin}"
  mkdir -p "${BIN%/bin}"
  unpack() {  # xz where the tool is there, else Python's tarfile
    if command -v xz >/dev/null 2>&1; then
      xz -dc "$1" | tar xf - -C "$2"
    else
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"
    fi
  }
  unpack "$BUNDLE/bin.tar.xz" "${BIN%/bin}" || { echo "gpu_check: cannot unpack $BUNDLE/bin.tar.xz"; exit 1; }
  [[ -f "$BUNDLE/lib.tar.xz" ]] && unpack "$BUNDLE/lib.tar.xz" "${BIN%/bin}"
  echo "gpu_check: bundle $BUNDLE:"
  cat "$BUNDLE/manifest.txt"
  cp "$BUNDLE/manifest.txt" "$LOGS/" 2>/dev/null
else
  gen=()
  command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
  CUTLASS_INC="${TESSERA_CUTLASS_DIR:-$ROOT/.cutlass}"
  [[ -d "$CUTLASS_INC" ]] || CUTLASS_INC=""
  GTEST_SRC="${TESSERA_GTEST_SOURCE_DIR:-$ROOT/.gtest}"
  echo "gpu_check: building in $BUILD (CUDA archs ${TESSERA_CUDA_ARCHS:-90})"
  cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTESSERA_WITH_CUDA=ON \
    -DTESSERA_CUDA_ARCHS="${TESSERA_CUDA_ARCHS:-90}" -DTESSERA_GTEST_SOURCE_DIR="$GTEST_SRC" \
    ${CUTLASS_INC:+-DTESSERA_CUTLASS_DIR="$CUTLASS_INC"} >"$LOGS/build.log" 2>&1 || {
    tail -30 "$LOGS/build.log"
    exit 1
  }
  mkdir -p "$BIN"
  # The bundle's names and where the build puts them (scripts/gpu_bundle.sh has the same list).
  for b in tessera_info:src/tools blocking_probe:perf test_device_kernels_gpu:tests/unit/collectives \
      test_gpu_convert:tests/gpu test_gpu_comm:tests/gpu test_gpu_p2p:tests/gpu \
      test_gpu_cuda_ipc:tests/gpu test_gpu_coll:tests/gpu test_gpu_coll_stream:tests/gpu \
      test_gpu_sendrecv:tests/gpu test_gpu_windows:tests/gpu test_gpu_fused:tests/gpu \
      gpu_transport_bw:perf \
      all_reduce_perf:perf all_gather_perf:perf reduce_scatter_perf:perf sendrecv_perf:perf \
      fused_perf:perf test_nccl_threads:tests/nccl; do
    targets+=("${b%%:*}")
    ln -sfn "$BUILD/${b#*:}/${b%%:*}" "$BIN/${b%%:*}"
  done
  ln -sfn "$BUILD/nccl/libnccl.so.2" "$BIN/libnccl.so.2"
  ln -sfn "$BUILD/src/libtessera.so.0" "$BIN/libtessera.so.0"
  cmake --build "$BUILD" --parallel "$(nproc)" --target "${targets[@]}" tessera_nccl -- -k 0 \
    >>"$LOGS/build.log" 2>&1 || echo "gpu_check: some targets did not build (build.log); going on"
fi
have() { [[ -x "$BIN/$1" ]]; }
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# cuBLAS for fused_perf and test_gpu_fused: the toolkit's, or the pip wheel's.
if ! ldconfig -p 2>/dev/null | grep -q libcublas.so.13; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib \
      "$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)"; do
    [[ -n "$d" && -e "$d/libcublas.so.13" ]] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d" && break
  done
fi

# gtest binary, each of its tests in a process of its own under `limit` seconds.
gtest_each() {
  local bin=$1 limit=$2 filter=${3:-*} label=${4:-}
  if ! have "$bin"; then
    record "NOT-BUILT" "$bin$label" 0
    return
  fi
  local tests=() suite="" line
  while IFS= read -r line; do
    if [[ "$line" =~ ^([A-Za-z0-9_/]+\.)$ ]]; then
      suite=${BASH_REMATCH[1]}
    elif [[ "$line" =~ ^\ \ ([A-Za-z0-9_/]+) ]]; then
      tests+=("$suite${BASH_REMATCH[1]}")
    fi
  done < <("$BIN/$bin" --gtest_list_tests --gtest_filter="$filter" 2>/dev/null)
  [[ ${#tests[@]} -eq 0 ]] && record "FAIL" "$bin$label: lists no test" 0
  local t out
  for t in "${tests[@]}"; do
    out=$(mktemp)
    local l
    l=$(left)
    if [[ $l -lt 5 ]]; then
      record "NOT-RUN" "$t$label" 0 "stage budget spent"
      continue
    fi
    [[ $l -lt $limit ]] || l=$limit
    local t0
    t0=$(date +%s.%N)
    timeout -k 5 "$l" "$BIN/$bin" --gtest_filter="$t" --gtest_color=no >"$out" 2>&1
    local rc=$?
    local secs
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    { echo "----- $bin $t$label (exit $rc, $secs s)"; cat "$out"; } >>"$LOG"
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
      record "TIMEOUT" "$t$label" "$secs" "killed after $l s"
      tail -8 "$out"
    elif [[ $rc -eq 0 ]] && grep -q '^\[  SKIPPED \]' "$out"; then
      local why
      why=$(grep -m1 -A1 ': Skipped' "$out" | tail -1 | head -c 150)
      if [[ "$t" == *.SeparateGpus && $GPUS -lt 2 ]]; then
        record "SKIP-OK" "$t$label" "$secs" "one GPU"
      else
        record "SKIPPED" "$t$label" "$secs" "$why"
      fi
    elif [[ $rc -eq 0 ]]; then
      record "PASS" "$t$label" "$secs"
    else
      record "FAIL" "$t$label" "$secs" "exit $rc"
      grep -E 'Failure|error|Error|Expected|Which is|Value of' "$out" | head -12
    fi
    rm -f "$out"
  done
}

GPUS=0
# --- probe -------------------------------------------------------------------------------------
if enabled probe; then
  stage_begin probe
  {
    echo "date $(date -u +%FT%TZ), host $(hostname), kernel $(uname -r), $(nproc) cores"
    echo "ulimit -n $(ulimit -n) (hard $(ulimit -Hn))"
    if command -v nvidia-smi >/dev/null 2>&1; then
      nvidia-smi --query-gpu=index,name,compute_mode,driver_version,memory.total,clocks.sm,clocks.max.sm,mig.mode.current \
        --format=csv 2>&1
      nvidia-smi topo -m 2>&1 | head -5
    else
      echo "nvidia-smi: not found"
    fi
    command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -2
    if command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
      echo "MPS: nvidia-cuda-mps-control is here"
    else
      echo "MPS: no nvidia-cuda-mps-control on this machine"
    fi
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1
  } >>"$LOG" 2>&1
  cat "$LOG"
  if have tessera_info; then
    timed 15 "$BIN/tessera_info"
    GPUS=$(grep -c '^  \[[0-9]*\] ' "$LOG")
    grep -A8 -i 'CUDA devices\|device kernels' "$LOG" | head -24
  fi
  if [[ $GPUS -eq 0 ]]; then
    record "FAIL" "tessera_info lists a CUDA device" 0 "none: nothing below runs on a GPU"
    echo "gpu_check: no usable CUDA device; stopping"
    exit 1
  fi
  record "ok" "probe: $GPUS GPU(s)" "$(elapsed)"
else
  GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
fi

# --- correct -----------------------------------------------------------------------------------
if enabled correct; then
  stage_begin correct
  if have blocking_probe; then
    timed 60 "$BIN/blocking_probe" --block-ms 400 --spin-s 20
    [[ $RC -eq 0 ]] && record "ok" "blocking_probe" "$SECS" || record "FAIL" "blocking_probe" "$SECS" "exit $RC"
    sed -n '/blocking_probe summary/,$p' "$LOG"
  else
    record "NOT-BUILT" "blocking_probe" 0
  fi
  gtest_each test_device_kernels_gpu 30
  gtest_each test_gpu_convert 30
  gtest_each test_gpu_comm 45
  gtest_each test_gpu_p2p 45
  gtest_each test_gpu_coll 120 '*Launch*'
  gtest_each test_gpu_coll 120 '*Persistent*'
  gtest_each test_gpu_coll_stream 60
  gtest_each test_gpu_sendrecv 60
  gtest_each test_gpu_windows 90
  # Processes sharing the GPU: time-sliced without MPS (correctness only), then under MPS.
  gtest_each test_gpu_cuda_ipc 60 '*' " [no MPS]"
  if command -v nvidia-cuda-mps-control >/dev/null 2>&1 && [[ $(left) -gt 30 ]]; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/tessera-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/tessera-mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d >>"$LOG" 2>&1; then
      gtest_each test_gpu_cuda_ipc 60 '*' " [MPS]"
      echo quit | nvidia-cuda-mps-control >>"$LOG" 2>&1
      sleep 1
    else
      record "FAIL" "starting the MPS daemon" 0 "see correct.log"
    fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  else
    echo "MPS: not run (no nvidia-cuda-mps-control here, or no budget left)" | tee -a "$LOG"
  fi
fi

# --- figures -----------------------------------------------------------------------------------
# Median (and min, max) of a list of numbers.
stats() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END {
  if (NR == 0) { print "? ? ?"; exit } m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  printf "%g %g %g\n", m, v[1], v[NR] }'; }
# Runs a perf binary `LAUNCHES` times; sets T and BW to "median min max" of the first data row's
# out-of-place time (us) and busbw (GB/s).
perf_rows() {
  local n=$1
  shift
  local ts="" bws="" i row
  for ((i = 0; i < n; ++i)); do
    timed 90 "$@"
    if [[ $RC -ne 0 ]]; then
      T="FAIL" BW="exit $RC"
      return 1
    fi
    # This launch's lines (after its "$ command" line): the data row, and nccl-tests' verdict.
    local out
    out=$(tac "$LOG" | awk '/^\$ /{exit} {print}' | tac)
    row=$(awk '$1 ~ /^[0-9]+$/ && NF >= 8 { r = $6 " " $8 } END { print r }' <<<"$out")
    if [[ -z "$row" ]] || grep -q 'Out of bounds values : [1-9]' <<<"$out"; then
      T="FAIL" BW="wrong results or no data row: $(grep -m1 'Out of bounds\|rror' <<<"$out")"
      return 1
    fi
    ts="$ts ${row% *}" bws="$bws ${row#* }"
  done
  T=$(echo "$ts" | stats) BW=$(echo "$bws" | stats)
}
if enabled figures; then
  stage_begin figures
  copy_rw=""
  if have gpu_transport_bw; then
    timed 120 "$BIN/gpu_transport_bw" -d 0,0 -i 20 -m 256
    # The D2D copy: cudaMemcpy GB/s at 256 MiB (bytes copied); read + written = 2x.
    copy_rw=$(awk '$1 == "p2p" && $3 == 268435456 { v = 2 * $5 } END { if (v) print v }' "$LOG")
    [[ $RC -eq 0 ]] && record "ok" "gpu_transport_bw (D2D copy r+w ${copy_rw:-?} GB/s)" "$SECS" \
      || record "FAIL" "gpu_transport_bw" "$SECS" "exit $RC"
    sed -n '/transport/,$p' "$LOG" | grep -E '^(p2p|cuda_ipc|#)' | head -30
  fi
  # Traffic of n ranks sharing one GPU for a collective of S bytes: every rank reads and writes
  # S(n-1)/n per all-gather or reduce-scatter (all-reduce: twice), i.e. 2 n busbw per second, as a
  # fraction of what the D2D copy moves.
  # -R 1: the buffers are windows (tsrCommWindowRegister), so the calls run zero-copy plans.
  big=(-b 256M -e 256M -n 10 -w 3 -c 1 -m device)
  for coll in all_gather reduce_scatter all_reduce; do
    for n in 2 4 8; do
     for reg in 0 1; do
      name="$coll busbw 256 MiB, $n thread ranks"
      [[ $reg == 1 ]] && name="$name, windows (-R 1)"
      if ! have "${coll}_perf"; then record "NOT-BUILT" "$name" 0; continue; fi
      if ! perf_rows "$LAUNCHES" "$BIN/${coll}_perf" "${big[@]}" -t "$n" -R "$reg"; then
        record "FAIL" "$name" "$SECS" "$BW"
        continue
      fi
      read -r bm bmin bmax <<<"$BW"
      ratio=$(awk -v b="$bm" -v n="$n" -v c="${copy_rw:-0}" \
        'BEGIN { if (c > 0) printf "%.2f", 2 * n * b / c; else print "?" }')
      record "ok" "$name" "$SECS" "busbw $bm GB/s [$bmin-$bmax], x copy traffic $ratio"
     done
    done
  done
  small=(-b 8 -e 8 -n 1000 -w 100 -c 0 -m device -t 8)
  declare -A lat
  for mode in persistent kernel; do
    name="8 B all-reduce per call, 8 thread ranks, $mode"
    if perf_rows "$LAUNCHES" env TESSERA_LAUNCH=$mode "$BIN/all_reduce_perf" "${small[@]}"; then
      read -r lm lmin lmax <<<"$T"
      lat[$mode]=$lm
      record "ok" "$name" "$SECS" "$lm us [$lmin-$lmax]"
    else
      record "FAIL" "$name" "$SECS" "$BW"
    fi
  done
  name="8 B all-reduce per call, graph of 100 replayed, 8 thread ranks"
  if perf_rows "$LAUNCHES" "$BIN/all_reduce_perf" -b 8 -e 8 -n 100 -G 10 -w 10 -c 0 -m device -t 8; then
    read -r lm lmin lmax <<<"$T"
    record "ok" "$name" "$SECS" "$lm us [$lmin-$lmax]"
  else
    record "FAIL" "$name" "$SECS" "$BW"
  fi
  if [[ -n "${lat[persistent]:-}" && -n "${lat[kernel]:-}" ]]; then
    record "ok" "8 B all-reduce, persistent / launch mode" 0 \
      "$(awk -v p="${lat[persistent]}" -v k="${lat[kernel]}" 'BEGIN { printf "%.2f", p / k }')"
  fi
fi

# --- fused -------------------------------------------------------------------------------------
if enabled fused; then
  stage_begin fused
  gtest_each test_gpu_fused 90
  # fused_perf's data row: M N K ranks fused(us) gemm+coll(us) gemm(us) coll(us) f/(g+c) overlap
  # f/gemm err.
  fused_row() {
    local name=$1
    shift
    timed 150 "$@"
    local out
    out=$(tac "$LOG" | awk '/^\$ /{exit} {print}' | tac)
    if [[ $RC -ne 0 ]] || ! grep -q 'every fused result agrees' <<<"$out"; then
      record "FAIL" "$name" "$SECS" "exit $RC $(grep -m1 'skipped\|ERROR\|WRONG\|rror' <<<"$out" | head -c 120)"
      return
    fi
    local row
    row=$(awk '$1 ~ /^[0-9]+$/ && NF >= 12 { print $5, $9, $10, $11; exit }' <<<"$out")
    read -r ft fr fo fg <<<"$row"
    record "ok" "$name" "$SECS" "fused $ft us, fused/(gemm+coll) $fr, overlap $fo, fused/gemm $fg"
  }
  if have fused_perf; then
    fused=("$BIN/fused_perf" -d device -O rs -t bf16 -M 8192 -N 8192 -K 2048 -i 10 -w 3)
    fused_row "fused GEMM+RS 8192x8192x2048 bf16, 4 ranks" "${fused[@]}" -n 4
    fused_row "fused GEMM 8192x8192x2048 bf16, 1 rank vs cuBLAS" "${fused[@]}" -n 1
    fused_row "fused GEMM+RS M sweep 128..16384, 4 ranks" "$BIN/fused_perf" -d device -O rs \
      -t bf16 -n 4 -i 5 -w 2 -J "$LOGS/fused_sweep.json"
  else
    record "NOT-BUILT" "fused_perf" 0
  fi
fi

# --- frameworks --------------------------------------------------------------------------------
if enabled frameworks; then
  stage_begin frameworks
  gtest_each test_nccl_threads 60
  if have nccltests_all_reduce_perf && have libnccl.so.2; then
    for coll in all_reduce all_gather reduce_scatter; do
      timed 90 env NCCL_DEBUG=VERSION "$BIN/nccltests_${coll}_perf" -b 8 -e 256M -f 4 -g 1 -t 1 -c 1
      # A one-rank run: correctness of the drop-in on device buffers and its call overhead.
      wrong=$(tac "$LOG" | awk '/^\$ /{exit} /Out of bounds values/ { print $NF }' | head -1)
      [[ $RC -eq 0 ]] && record "ok" "nccl-tests ${coll}_perf -g 1 -t 1 over the drop-in" "$SECS" "$wrong" \
        || record "FAIL" "nccl-tests ${coll}_perf -g 1 -t 1 over the drop-in" "$SECS" "exit $RC"
    done
  else
    record "NOT-BUILT" "nccl-tests over the drop-in" 0
  fi
  if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    if have libnccl.so.2; then
      timed 120 env LD_PRELOAD="$BIN/libnccl.so.2" python3 "$ROOT/tests/nccl/torch_pg_nccl.py" 2
      [[ $RC -eq 0 ]] && record "ok" "ProcessGroupNCCL over the drop-in (LD_PRELOAD), 2 ranks" "$SECS" \
        || record "FAIL" "ProcessGroupNCCL over the drop-in (LD_PRELOAD), 2 ranks" "$SECS" "exit $RC"
    fi
    # The PyTorch backend, built against this machine's torch from the bundle's static library
    # (or this build's).
    ext="${TMPDIR:-/tmp}/tessera-torch"
    rm -rf "$ext"
    mkdir -p "$ext"
    if [[ -n "$BUNDLE" ]]; then
      tdir="${BIN%/bin}/lib"
      timed 180 env CMAKE_PREFIX_PATH="$tdir" MAX_JOBS="$(nproc)" python3 "$ROOT/python/setup.py" -q build \
        --build-base "$ext/tmp" --build-lib "$ext/lib"
    else
      timed 180 env TESSERA_BUILD_DIR="$BUILD" MAX_JOBS="$(nproc)" python3 "$ROOT/python/setup.py" -q build \
        --build-base "$ext/tmp" --build-lib "$ext/lib"
    fi
    if [[ $RC -eq 0 ]]; then
      record "ok" "tessera_torch built against $(python3 -c 'import torch; print(torch.__version__)')" "$SECS"
      timed 200 env PYTHONPATH="$ext/lib:$ROOT/tests/torch" python3 -m pytest -q -rs -p no:cacheprovider \
        "$ROOT/tests/torch/test_cuda.py"
      [[ $RC -eq 0 ]] && record "ok" "tests/torch/test_cuda.py" "$SECS" || record "FAIL" "tests/torch/test_cuda.py" "$SECS" "exit $RC"
      timed 150 env PYTHONPATH="$ext/lib" python3 "$ROOT/perf/torch_bench.py" --device cuda -n 2 \
        --launches 1 --rounds 2 --scale 0.25 --ddp-steps 3 --json "$LOGS/torch_cuda.json"
      [[ $RC -eq 0 ]] && record "ok" "perf/torch_bench.py --device cuda" "$SECS" || record "FAIL" "perf/torch_bench.py --device cuda" "$SECS" "exit $RC"
    else
      record "FAIL" "tessera_torch build against this machine's torch" "$SECS" "exit $RC"
    fi
  else
    record "NOT-RUN" "PyTorch on CUDA tensors" 0 "python3 here has no torch with CUDA"
  fi
fi

# --- model -------------------------------------------------------------------------------------
# tessera_sim's compute model (issue 30): the simulator's GEMM and memory-bound ops timed alone on
# this GPU, and a GPT layer run by PyTorch; measured.json comes back, and
# `perf/gpu_model_check.py compare` puts it beside the model's predictions where tessera_sim is.
if enabled model; then
  stage_begin model
  mdir="${BUNDLE:+$BUNDLE/model}"
  if [[ -z "$mdir" || ! -f "$mdir/configs.json" ]]; then
    record "NOT-RUN" "perf/gpu_model_check.py measure" 0 "its workloads come with the bundle (tessera_sim writes them)"
  elif ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    record "NOT-RUN" "perf/gpu_model_check.py measure" 0 "python3 here has no torch with CUDA"
  else
    mwork="${TMPDIR:-/tmp}/tessera-model"
    rm -rf "$mwork" && cp -r "$mdir" "$mwork"
    timed "${BUDGET[model]}" python3 "$ROOT/perf/gpu_model_check.py" measure "$mwork" --out "$LOGS/model_measured.json"
    [[ $RC -eq 0 ]] && record "ok" "perf/gpu_model_check.py measure" "$SECS" || record "FAIL" "perf/gpu_model_check.py measure" "$SECS" "exit $RC"
  fi
fi

# --- unit (build mode) -------------------------------------------------------------------------
if enabled unit && [[ -z "$BUNDLE" ]]; then
  stage_begin unit
  if cmake --build "$BUILD" --parallel "$(nproc)" >>"$LOG" 2>&1; then
    timed "${BUDGET[unit]}" bash -c "cd '$BUILD' && ctest -L unit --parallel $(nproc) --timeout 300"
    [[ $RC -eq 0 ]] && record "ok" "ctest -L unit" "$SECS" || record "FAIL" "ctest -L unit" "$SECS" "exit $RC"
  else
    record "FAIL" "building the rest" 0
  fi
fi

echo
echo "=== summary ($(elapsed) s; $failures not passed)"
cat "$SUMMARY"
[[ $failures -eq 0 ]]
