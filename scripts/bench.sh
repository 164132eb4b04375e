#!/usr/bin/env bash
# The benchmarks from a fresh machine: install what is missing, configure, build, then
#   1. tessera_info and the bootstrap/communicator smoke benchmark (4 ranks);
#   2. tessera_tune, when this host has no cached tuner file yet (a minute; BENCH_TUNE=0 skips);
#   3. all-reduce, all-gather and reduce-scatter over 2 and 4 MPI processes from 8 B to 256 MiB,
#      tessera beside Open MPI with its default settings (the perf binaries' --baseline mpi: both
#      on the same buffers, in interleaved blocks of the same launch) and beside each of Open MPI's
#      tuned algorithms for the collective (coll_tuned_use_dynamic_rules 1 and
#      coll_tuned_<collective>_algorithm N), the best of them per size; BENCH_LAUNCHES (3) launches
#      of each, taken in turn; each row the median with min and max; the tables, bench.json and
#      bench.png (busbw against size, perf/plot.py) go to BENCH_OUT (bench-out);
#   4. 4 thread ranks on this machine's cores: all-reduce from 8 B to 4 KiB;
#   5. where torch is installed, perf/torch_bench.py: torch.distributed on tessera beside Gloo
#      (all_reduce, all_gather_into_tensor, reduce_scatter_tensor over 2 and 4 processes from 8 B
#      to BENCH_MAX, and a DDP step of a ~50 M-parameter model), torch.json and torch.png in
#      BENCH_OUT (BENCH_TORCH=0 skips it).
# BENCH_NPS ("2 4"), BENCH_COLLS ("allreduce allgather reducescatter"), BENCH_MAX (256M) narrow
# it; BENCH_TRANSPORT=1 adds transport_perf (put bandwidth and signal round trip per transport
# beside memcpy and ucx_perftest, about a minute). Extra arguments go to bootstrap_perf.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

TESSERA_SETUP_BENCH=1 tessera_setup
tessera_configure
targets=(tessera_info tessera_tune bootstrap_perf transport_perf all_reduce_perf all_gather_perf
  reduce_scatter_perf)
if python3 -c "import torch" 2>/dev/null && [[ "${BENCH_TORCH:-1}" == "1" ]]; then
  targets+=(tessera_torch)
fi
tessera_build --target "${targets[@]}"
OUT="${BENCH_OUT:-$ROOT/bench-out}"
LAUNCHES="${BENCH_LAUNCHES:-3}"
NPS="${BENCH_NPS:-2 4}"
COLLS="${BENCH_COLLS:-allreduce allgather reducescatter}"
MAX="${BENCH_MAX:-256M}"
mkdir -p "$OUT/raw"

"$BUILD_DIR/src/tools/tessera_info"
echo
"$BUILD_DIR/perf/bootstrap_perf" -n 4 "$@"
if [[ "${BENCH_TRANSPORT:-0}" == "1" ]]; then
  echo
  "$BUILD_DIR/perf/transport_perf" ${TRANSPORT_PERF_ARGS:-}
fi

echo
cache=$("$BUILD_DIR/src/tools/tessera_tune" --cache-path 2>/dev/null || true)
if [[ -n "${TESSERA_TUNER_FILE:-}" ]]; then
  echo "# tuner: TESSERA_TUNER_FILE=$TESSERA_TUNER_FILE"
elif [[ -n "$cache" && -f "$cache" ]]; then
  echo "# tuner: this host's cached file $cache (rm it or run tessera_tune to remake it)"
elif [[ "${BENCH_TUNE:-1}" == "1" ]]; then
  echo "# tuner: no cached file for this host yet: tessera_tune measures this machine first"
  "$BUILD_DIR/src/tools/tessera_tune" | grep "^#"
else
  echo "# tuner: the built-in model (BENCH_TUNE=0, no cached file)"
fi

if ! grep -q "TESSERA_HAVE_MPI 1" "$BUILD_DIR/src/core/build_config.hpp" ||
  ! command -v mpirun >/dev/null 2>&1; then
  echo "# the comparison with Open MPI: skipped (this build has no MPI, or there is no mpirun)"
else
  mpi_flags=()
  # Open MPI's default settings (its binding of one rank per core, its single-copy mechanism), as
  # a baseline should be; root in a container and more ranks than cores need the two flags.
  if mpirun --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then
    mpi_flags=(--allow-run-as-root --oversubscribe)
  fi
  binary() {
    case "$1" in
      allreduce) echo all_reduce_perf ;; allgather) echo all_gather_perf ;;
      reducescatter) echo reduce_scatter_perf ;;
    esac
  }
  algorithms() {  # Open MPI 4.1's coll_tuned algorithm numbers
    case "$1" in
      allreduce) echo "1 2 3 4 5 6" ;;
      allgather) if [[ "$2" == 2 ]]; then echo "1 2 3 4 5 6"; else echo "1 2 3 4 5"; fi ;;
      reducescatter) echo "1 2 3 4" ;;
    esac
  }
  mcaName() { [[ "$1" == reducescatter ]] && echo reduce_scatter || echo "$1"; }
  # One launch, in three sweeps: 8 B - 4 KiB by doubling, then 16 KiB - 1 MiB and 4 MiB - MAX by
  # fours, the small sizes with many calls per figure, the large ones with few.
  launch() {  # launch <file> <binary> <np> [mpirun args...]
    local file="$1" bin="$2" np="$3" range
    shift 3
    : >"$file"
    for range in "-b 8 -e 4K -f 2 -n 500 -w 50" "-b 16K -e 1M -f 4 -n 50 -w 5" \
      "-b 4M -e $MAX -f 4 -n 5 -w 1"; do
      # shellcheck disable=SC2086
      mpirun "${mpi_flags[@]}" "$@" -np "$np" "$BUILD_DIR/perf/$bin" $range -c 1 --baseline mpi \
        >>"$file" 2>&1
    done
  }
  start=$(date +%s)
  for c in $COLLS; do
    for np in $NPS; do
      for ((l = 0; l < LAUNCHES; l++)); do
        launch "$OUT/raw/$c.np$np.default.$l.txt" "$(binary "$c")" "$np"
        for a in $(algorithms "$c" "$np"); do
          launch "$OUT/raw/$c.np$np.alg$a.$l.txt" "$(binary "$c")" "$np" \
            --mca coll_tuned_use_dynamic_rules 1 --mca "coll_tuned_$(mcaName "$c")_algorithm" "$a"
        done
      done
      echo "# $c over $np processes: $LAUNCHES launches of each variant ($(( $(date +%s) - start )) s so far)"
    done
  done
  echo
  python3 "$ROOT/perf/bench_report.py" "$OUT" --launches "$LAUNCHES" --nps "$NPS" --colls "$COLLS" \
    -J "$OUT/bench.json"
  if python3 -c "import matplotlib" 2>/dev/null; then
    python3 "$ROOT/perf/plot.py" "$OUT/bench.json" -o "$OUT/bench.png"
  else
    echo "# plot: skipped (no matplotlib for python3; scripts/setup.sh installs it for the benchmarks)"
  fi
fi

echo
echo "# 4 thread ranks on $(nproc) cores: all-reduce, float sum, 1000 calls a size"
"$BUILD_DIR/perf/all_reduce_perf" -t 4 -b 8 -e 4K -f 2 -n 1000 -w 100 -c 1 ${ALL_REDUCE_PERF_ARGS:-}

if [[ "${BENCH_TORCH:-1}" != "1" ]]; then
  echo "# torch.distributed beside Gloo: skipped (BENCH_TORCH=0)"
elif [[ ! -d "$BUILD_DIR/python/tessera_torch" ]]; then
  echo "# torch.distributed beside Gloo: skipped (no torch for python3, so no tessera_torch)"
else
  echo
  echo "# torch.distributed: tessera beside Gloo (perf/torch_bench.py)"
  PYTHONPATH="$BUILD_DIR/python" python3 "$ROOT/perf/torch_bench.py" -n "${NPS// /,}" -e "$MAX" \
    --json "$OUT/torch.json" --plot "$OUT/torch.png" ${TORCH_BENCH_ARGS:-}
fi
