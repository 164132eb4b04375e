#!/usr/bin/env bash
# tessera_sim against this machine (issue 17's this-host validation; a benchmark, not a test).
#
# For each rank count and collective: one ring plan file (tessera_plan generate), run by the perf
# binary under mpirun (ranks are processes on shm, as the this-host model assumes) RUNS times,
# then simulated by tessera_sim --platform this-host --plan on the same file, calibrated at its
# start, right after the measurements. Prints tessera_sim's table with the measured median beside
# each simulated time and the error per row, and a summary line per case.
#
#   BUILD_DIR=build perf/sim_validate.sh            # 2 and 4 ranks, 64 KiB .. 256 MiB, x4
#   NPS="2" COLLS="allreduce" RUNS=5 perf/sim_validate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
NPS=${NPS:-"2 4"}
COLLS=${COLLS:-"allreduce allgather reducescatter"}
RUNS=${RUNS:-3}
MIN=${MIN:-64K}
MAX=${MAX:-256M}
FACTOR=${FACTOR:-4}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

plan_tool=$BUILD_DIR/src/tools/tessera_plan
sim_tool=$BUILD_DIR/src/tools/tessera_sim
for t in "$plan_tool" "$sim_tool"; do
  [[ -x $t ]] || { echo "sim_validate: $t is not built (needs SimGrid and JSON)" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "sim_validate: needs mpirun" >&2; exit 1; }

mpi_flags=(--oversubscribe --bind-to none)
[[ $(id -u) -eq 0 ]] && mpi_flags+=(--allow-run-as-root)
declare -A perf_bin=([allreduce]=all_reduce_perf [allgather]=all_gather_perf
                     [reducescatter]=reduce_scatter_perf)
summary=()
for np in $NPS; do
  for coll in $COLLS; do
    plan=$OUT/$coll.n$np.json
    "$plan_tool" generate --coll "$coll" --algo ring --nranks "$np" -o "$plan" >/dev/null 2>&1
    runs=()
    for ((k = 1; k <= RUNS; ++k)); do
      json=$OUT/$coll.n$np.run$k.json
      mpirun -np "$np" "${mpi_flags[@]}" \
        "$BUILD_DIR/perf/${perf_bin[$coll]}" --plan "$plan" -b "$MIN" -e "$MAX" -f "$FACTOR" \
        -n 10 -w 3 -c 0 -J "$json" >/dev/null
      runs+=("$json")
    done
    # The median of the runs per size, with min and max, in the perf binaries' -J shape.
    merged=$OUT/$coll.n$np.measured.json
    python3 - "$merged" "${runs[@]}" <<'EOF'
import json, sys, statistics
out, files = sys.argv[1], sys.argv[2:]
per = {}
for f in files:
    for row in json.load(open(f))["rows"]:
        t = (row.get("out_of_place") or {}).get("time_us")
        if t is not None:
            per.setdefault(row["size"], []).append(t)
rows = [{"size": s, "out_of_place": {"time_us": statistics.median(v), "min_us": min(v),
         "max_us": max(v), "runs": len(v)}} for s, v in sorted(per.items())]
json.dump({"program": "sim_validate", "rows": rows}, open(out, "w"), indent=1)
EOF
    echo "==== $coll, $np ranks: measured median of $RUNS runs vs tessera_sim (this-host)"
    table=$("$sim_tool" --platform this-host --plan "$plan" -b "$MIN" -e "$MAX" -f "$FACTOR" \
              --compare "$merged")
    echo "$table"
    summary+=("$coll np=$np: $(grep -o 'median |error| .*' <<<"$table")")
  done
done
echo "==== summary (this machine, ring plans, out-of-place)"
printf '%s\n' "${summary[@]}"
echo "(files in $OUT)"
