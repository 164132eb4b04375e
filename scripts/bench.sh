#!/usr/bin/env bash
# The main job from a fresh machine: install what is missing, configure, build, then print
# tessera_info and run the bootstrap/communicator smoke benchmark over 4 ranks (threads and
# processes), then transport_perf (put bandwidth and signal round trip of inproc, shm and ucx,
# next to memcpy and ucx_perftest), then the all-reduce table: all_reduce_perf over 4 thread
# ranks from 8 B to 64 MiB and, where MPI was built and mpirun exists, over 2 MPI processes
# beside MPI_Allreduce (--baseline mpi). Extra arguments go to bootstrap_perf;
# TRANSPORT_PERF_ARGS (e.g. "-u sm -J transport.json") to transport_perf; ALL_REDUCE_PERF_ARGS
# (e.g. "-A ring -J allreduce.json") to both all_reduce_perf runs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

tessera_setup
tessera_configure
tessera_build --target tessera_info bootstrap_perf transport_perf all_reduce_perf
"$BUILD_DIR/src/tools/tessera_info"
echo
"$BUILD_DIR/perf/bootstrap_perf" -n 4 "$@"
echo
"$BUILD_DIR/perf/transport_perf" ${TRANSPORT_PERF_ARGS:-}

# All-reduce: sizes x4 per step and fewer iterations than nccl-tests' 20, so the two tables take
# a minute or two on two cores (the 64 MiB rows dominate).
echo
"$BUILD_DIR/perf/all_reduce_perf" -t 4 -b 16 -e 64M -f 4 -n 10 -w 2 -c 1 --baseline memcpy \
  ${ALL_REDUCE_PERF_ARGS:-}
if grep -q "TESSERA_HAVE_MPI 1" "$BUILD_DIR/src/core/build_config.hpp" &&
  command -v mpirun >/dev/null 2>&1; then
  mpi_flags=()
  # Open MPI's default settings (its binding of one rank per core, its single-copy mechanism),
  # as the baseline should be; only running as root in a container needs a flag.
  if mpirun --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then
    mpi_flags=(--allow-run-as-root)
  fi
  echo
  mpirun "${mpi_flags[@]}" -np 2 "$BUILD_DIR/perf/all_reduce_perf" -b 16 -e 256M -f 4 -n 10 -w 2 \
    -c 1 --baseline mpi ${ALL_REDUCE_PERF_ARGS:-}
else
  echo "# all_reduce_perf over MPI processes: skipped (this build has no MPI, or no mpirun)"
fi
