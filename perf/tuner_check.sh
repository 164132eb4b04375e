#!/usr/bin/env bash
# The tuner's choice beside the best forced family, per size: for each collective and process
# count, one sweep launch of the perf binary with the tuner choosing and one per family forced
# with -A (TESSERA_ALGO; the tuner still picks that family's pipeline), in rounds that take the
# launches in turn (each round starting elsewhere), so that the launches of a round see the same
# machine: per size and round, the fastest forced family's time over the tuner's, and the median
# of that ratio over the rounds (this machine's speed moves by tens of percent within minutes, so
# figures of different rounds are not compared with each other).
# It prints, per size, the family the tuner chose (its TUNING log line), its time, the fastest
# forced family and its time, and their ratio (the issue asks for >= 0.9 at every size). The tuner
# reads this host's tuner file (tessera_tune) when there is one; TUNER_FILE=path names another.
#
#   perf/tuner_check.sh [-c "allreduce allgather reducescatter"] [-n "2 4"] [-r 5]
#                       [-b 8] [-e 256M] [-J out.json]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
colls="allreduce"
nps="2 4"
rounds=5
minb=8
maxb=256M
json=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -c) colls="$2"; shift 2 ;;
    -n) nps="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    -b) minb="$2"; shift 2 ;;
    -e) maxb="$2"; shift 2 ;;
    -J) json="$2"; shift 2 ;;
    *) echo "tuner_check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
mpi_flags=()
if mpirun --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then
  mpi_flags=(--allow-run-as-root --oversubscribe)
fi
[[ -n "${TUNER_FILE:-}" ]] && export TESSERA_TUNER_FILE="$TUNER_FILE"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

families() {  # the families that generate $1 on one host (the registry's, via tessera_plan)
  case "$1" in
    allreduce) echo "ring tree rhd oneshot twoshot" ;;
    allgather) echo "ring rhd oneshot" ;;
    reducescatter) echo "ring rhd twoshot" ;;
    broadcast) echo "ring oneshot" ;;
    reduce) echo "ring oneshot" ;;
  esac
}
binary() {
  case "$1" in
    allreduce) echo all_reduce_perf ;; allgather) echo all_gather_perf ;;
    reducescatter) echo reduce_scatter_perf ;; broadcast) echo broadcast_perf ;;
    reduce) echo reduce_perf ;;
  esac
}

for c in $colls; do
  for np in $nps; do
    bin="$BUILD/perf/$(binary "$c")"
    configs=(tuner $(families "$c"))
    for ((r = 0; r < rounds; r++)); do
      # Each round starts with another configuration: none always runs first.
      for ((k = 0; k < ${#configs[@]}; k++)); do
        f=${configs[$(((k + r) % ${#configs[@]}))]}
        out="$work/$c.$np.$f.$r"
        : >"$out"
        : >"$out.log"
        # Small sizes with many calls per figure (a call is microseconds), large ones with few.
        for part in small large; do
          if [[ $part == small ]]; then range=(-b "$minb" -e 1M -n 1000 -w 50); else range=(-b 4M -e "$maxb" -n 10 -w 2); fi
          args=("${range[@]}" -f 4 -c 0)
          [[ "$f" != tuner ]] && args+=(-A "$f")
          TESSERA_DEBUG=INFO TESSERA_DEBUG_SUBSYS=TUNING \
            mpirun "${mpi_flags[@]}" -x TESSERA_DEBUG -x TESSERA_DEBUG_SUBSYS \
            ${TESSERA_TUNER_FILE:+-x TESSERA_TUNER_FILE} -np "$np" "$bin" "${args[@]}" \
            >>"$out" 2>>"$out.log" || {
            echo "tuner_check.sh: $c np=$np $f failed:" >&2; tail -5 "$out" "$out.log" >&2; exit 1; }
        done
      done
    done
  done
done

python3 "$ROOT/perf/tuner_check_report.py" "$work" "$colls" "$nps" "$rounds" "$json"
