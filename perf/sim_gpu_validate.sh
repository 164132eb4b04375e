#!/usr/bin/env bash
# tessera_sim against published NCCL figures on GPU machines (issue 17's GPU validation; a
# benchmark, not a test). Prints one line per case: the simulated figure, the published one and
# the error. The published figures (and where they come from):
#   8 x H100 in a node, ring all-reduce busbw at >= 256 MiB: 365-370 GB/s from 2 to 8 GPUs
#     (NVIDIA/nccl issue 1455, nccl-tests issue 212). The 8-GPU figure calibrated the presets'
#     NVLink efficiency (collectives/sim/platform.cpp); the 2- and 4-GPU rows are predictions.
#   8 x A100 SXM4 in a node, ring all-reduce busbw: 221.4 GB/s at 256 MiB and 230.1 at 1 GiB
#     (Oracle's OCI GPU-cluster tutorial, BM.GPU4.8, all_reduce_perf -g 8, out of place), 223.1
#     and 231.7 (Meta's gcm health-check sample, 8 A100 80GB, NCCL 2.16.2); "~230GB/s" (NCCL's
#     maintainers, nccl-tests issue 149). The 1 GiB figure calibrated the A100 presets' NVLink3
#     efficiency (up to 2026-12-07 they used H100's, which gave 250.6 there); the 256 MiB rows
#     are predictions.
#   2 nodes x 8 H100, 8 x 400 Gb/s, ring: about 390 GB/s busbw, 46-48 GB/s per NIC (nccl-tests
#     issues 290, 319): a prediction.
#   8 B all-reduce on 8 NVLink4 GPUs: about 12.5 us with NCCL (DeepEP issue 303): what tessera's
#     plans would take (the simulation has no kernel launch or host overhead).
# tessera's plans here: the zero-copy ring with 8 workers (channels, as NCCL's rings), whose
# rings rotate within each node so that they leave it over 8 different NICs; and what tessera
# runs for device buffers (tessera_sim without --algo: the device choice).
#   BUILD_DIR=build perf/sim_gpu_validate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
sim=$BUILD_DIR/src/tools/tessera_sim
[[ -x $sim ]] || { echo "sim_gpu_validate: $sim is not built (needs SimGrid)" >&2; exit 1; }

# busbw of the last row of a run, and its time in us.
row() { "$sim" "$@" | grep -E '^ +[0-9]' | tail -1; }
busbw() { row "$@" | awk '{print $6}'; }
timeus() { row "$@" | awk '{print $4}'; }
err() { awk -v s="$1" -v lo="$2" -v hi="$3" 'BEGIN {
  m = (lo + hi) / 2; e = (s - m) / m * 100;
  if (s >= lo && s <= hi) e = 0; else if (s < lo) e = (s - lo) / lo * 100; else e = (s - hi) / hi * 100;
  printf "%+.1f%%", e }'; }

printf '%-46s %12s %14s %8s\n' "case" "simulated" "published" "error"
line() { printf '%-46s %12s %14s %8s\n' "$1" "$2" "$3" "$4"; }
ring=(--algo ring --zero-copy --workers 8 -b 256M -e 256M)
for n in 2 4 8; do
  b=$(busbw --platform dgx-h100 --nranks $n "${ring[@]}")
  what=prediction; [[ $n == 8 ]] && what=calibration
  line "dgx-h100 $n GPUs ring 256 MiB busbw ($what)" "$b GB/s" "365-370 GB/s" "$(err "$b" 365 370)"
done
b=$(busbw --platform dgx-h100 --nranks 8 --algo ring --zero-copy --workers 8 -b 1G -e 1G)
line "dgx-h100 8 GPUs ring 1 GiB busbw" "$b GB/s" "365-370 GB/s" "$(err "$b" 365 370)"
# What tessera runs for device buffers (no --algo: the tuner's choice, staged through the device
# executor's scratch, a ring per CTA), beside the same published figures.
b=$(busbw --platform dgx-h100 --nranks 8 -b 256M -e 256M)
line "dgx-h100 8 GPUs device choice 256 MiB busbw" "$b GB/s" "365-370 GB/s" "$(err "$b" 365 370)"
b=$(busbw --platform dgx-h100 --nodes 2 -b 256M -e 256M)
line "2 x dgx-h100 device choice 256 MiB busbw" "$b GB/s" "~390 GB/s" "$(err "$b" 390 390)"
b=$(busbw --platform dgx-a100 --nranks 8 --algo ring --zero-copy --workers 8 -b 1G -e 1G)
line "dgx-a100 8 GPUs ring 1 GiB busbw (calibration)" "$b GB/s" "230.1-231.7 GB/s" "$(err "$b" 230.1 231.7)"
b=$(busbw --platform dgx-a100 --nranks 8 "${ring[@]}")
line "dgx-a100 8 GPUs ring 256 MiB busbw" "$b GB/s" "221.4-223.1 GB/s" "$(err "$b" 221.4 223.1)"
b=$(busbw --platform dgx-a100 --nranks 8 -b 256M -e 256M)
line "dgx-a100 8 GPUs device choice 256 MiB busbw" "$b GB/s" "221.4-223.1 GB/s" "$(err "$b" 221.4 223.1)"
b=$(busbw --platform hgx-h200 --nranks 8 "${ring[@]}")
line "hgx-h200 8 GPUs ring 256 MiB busbw" "$b GB/s" "(none)" "-"
b=$(busbw --platform dgx-h100 --nodes 2 "${ring[@]}")
nic=$(awk -v b="$b" 'BEGIN {printf "%.1f", b / 8}')
line "2 x dgx-h100 ring (8 rotated rings) busbw" "$b GB/s" "~390 GB/s" "$(err "$b" 390 390)"
line "2 x dgx-h100 ring, per NIC" "$nic GB/s" "46-48 GB/s" "$(err "$nic" 46 48)"
b=$(busbw --platform dgx-h100 --nodes 2 --algo ring --zero-copy --workers 1 -b 256M -e 256M)
line "2 x dgx-h100 ring, 1 worker (one NIC)" "$b GB/s" "-" "-"
b=$(busbw --platform dgx-h100 --nodes 2 --algo hier -b 256M -e 256M)
line "2 x dgx-h100 hier (staged, 2 MiB scratch)" "$b GB/s" "-" "-"
for spec in "ring" "ring --zero-copy" "oneshot" "oneshot --zero-copy" "twoshot --zero-copy" \
            "tree --zero-copy" "rhd --zero-copy"; do
  # shellcheck disable=SC2086
  t=$(timeus --platform dgx-h100 --nranks 8 --algo $spec -b 8 -e 8)
  line "dgx-h100 8 GPUs 8 B all-reduce, $spec" "$t us" "12.5 us (NCCL)" "-"
done
