#!/usr/bin/env bash
# Launch-to-launch steadiness of the host all-reduce: N separate launches of
# `all_reduce_perf -b S -e S` over 2 MPI processes at each size, on a quiet machine and with one
# busy process (a shell loop, unbound) beside the ranks; prints each set's out-of-place busbw as
# min / median / max and the slowest launch over the median (the issue holds it to >= 0.75).
# Each launch times about 0.1 s of calls (-n = 2 GiB / size, at least 20), so that a launch's
# figure is not one scheduler time slice. Before each launch perf/core_probe measures a cache
# line's round trip between the two cores (the machine's state: on the CI machine class ~120 ns
# when the two vCPUs share a last-level cache, ~550 ns when they do not); each row also gives
# the distribution of the launches that found the near state.
# Given several build folders (-b, repeated), it alternates their launches (A B A B ...), so a
# before/after comparison sees the same machine; every launch's figure also goes to -J's JSON.
#
#   perf/steadiness.sh [-n LAUNCHES] [-s "1M 16M 64M"] [-b BUILD_DIR]... [-J out.json] [-- args]
#
# Arguments after -- go to all_reduce_perf (e.g. -A ring, -R 1); MPIRUN_ARGS to mpirun.
set -euo pipefail
launches=20
sizes="1M 16M 64M"
builds=()
json=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) launches="$2"; shift 2 ;;
    -s) sizes="$2"; shift 2 ;;
    -b) builds+=("$2"); shift 2 ;;
    -J) json="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "steadiness.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ ${#builds[@]} -gt 0 ]] || builds=("${BUILD_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build}")
for b in "${builds[@]}"; do
  [[ -x "$b/perf/all_reduce_perf" ]] || { echo "steadiness.sh: no $b/perf/all_reduce_perf" >&2; exit 2; }
done
# The probe of the machine's state: this checkout's build, else any build given that has one.
probe=""
for b in "${BUILD_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build}" "${builds[@]}"; do
  if [[ -x "$b/perf/core_probe" ]]; then probe="$b/perf/core_probe"; break; fi
done
mpi_flags=()
if mpirun --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then mpi_flags=(--allow-run-as-root); fi

busy_pid=""
stop_busy() {
  if [[ -n "$busy_pid" ]]; then
    kill "$busy_pid" 2>/dev/null || true
    wait "$busy_pid" 2>/dev/null || true
  fi
  busy_pid=""
}
trap stop_busy EXIT

# The last 28 characters of a build folder's path, for the table.
label() {
  local p="$1"
  if ((${#p} > 28)); then echo "...${p: -25}"; else echo "$p"; fi
}

# Calls per launch for size $1 (K/M/G suffixes): 2 GiB / size, at least 20.
iters() {
  local s="$1" m=1
  case "$s" in *K) m=1024 ;; *M) m=$((1024 * 1024)) ;; *G) m=$((1024 * 1024 * 1024)) ;; esac
  local b=$(( ${s%[KMG]} * m ))
  local n=$(( (2 * 1024 * 1024 * 1024) / b ))
  (( n < 20 )) && n=20
  echo "$n"
}

# min median max slowest/median of the numbers on stdin
stats() {
  sort -g | awk '{a[NR]=$1} END {
    if (NR % 2) med = a[(NR+1)/2]; else med = (a[NR/2] + a[NR/2+1]) / 2;
    r = med > 0 ? a[1] / med : 0  # not inside printf: there awk reads ">" as a redirection
    printf "%.2f %.2f %.2f %.2f", a[1], med, a[NR], r }'
}

rows=()
echo "# all_reduce_perf, 2 MPI processes, float sum, out-of-place busbw (GB/s); $launches launches per row"
printf "# %-6s %-6s %-28s %8s %8s %8s %12s   %s\n" size load build min median max "slowest/med" \
  "launches in the near state (core_probe < 300 ns): count min median max slowest/med"
for load in quiet busy; do
  if [[ "$load" == busy ]]; then
    sh -c 'while :; do :; done' &
    busy_pid=$!
  fi
  for s in $sizes; do
    declare -A vals=() near=() rtts=()
    for ((i = 0; i < launches; i++)); do
      for b in "${builds[@]}"; do
        rtt=0
        [[ -n "$probe" ]] && rtt=$("$probe" 2>/dev/null || echo 0)
        v=$(mpirun "${mpi_flags[@]}" ${MPIRUN_ARGS:-} -np 2 "$b/perf/all_reduce_perf" -b "$s" -e "$s" \
          -n "$(iters "$s")" -w 5 -c 0 "$@" 2>/dev/null | awk '$1 ~ /^[0-9]+$/ {print $8; exit}')
        vals[$b]+="${v:-0} "
        rtts[$b]+="$rtt "
        if [[ "$rtt" -gt 0 && "$rtt" -lt 300 ]]; then near[$b]+="${v:-0} "; fi
      done
    done
    for b in "${builds[@]}"; do
      read -r mn med mx ratio <<<"$(tr ' ' '\n' <<<"${vals[$b]}" | grep . | stats)"
      nn=$(tr ' ' '\n' <<<"${near[$b]:-}" | grep -c . || true)
      nearText="-"
      if [[ "$nn" -gt 0 ]]; then
        read -r nmn nmed nmx nratio <<<"$(tr ' ' '\n' <<<"${near[$b]}" | grep . | stats)"
        nearText="$nn near: $nmn $nmed $nmx $nratio"
      fi
      printf "  %-6s %-6s %-28s %8s %8s %8s %12s   %s\n" "$s" "$load" "$(label "$b")" "$mn" "$med" \
        "$mx" "$ratio" "$nearText"
      list=$(tr ' ' '\n' <<<"${vals[$b]}" | grep . | paste -sd, -)
      rlist=$(tr ' ' '\n' <<<"${rtts[$b]}" | grep . | paste -sd, -)
      rows+=("{\"size\": \"$s\", \"load\": \"$load\", \"build\": \"$b\", \"busbw\": [$list], \"rttNs\": [$rlist], \"min\": $mn, \"median\": $med, \"max\": $mx, \"slowest_over_median\": $ratio}")
    done
    unset vals near rtts
  done
  stop_busy
done
if [[ -n "$json" ]]; then
  { echo "["; printf '%s\n' "${rows[@]}" | sed '$!s/$/,/'; echo "]"; } >"$json"
  echo "# wrote $json"
fi
