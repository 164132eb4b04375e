#!/usr/bin/env bash
# The main job from a fresh machine: install what is missing, configure, build, then print
# tessera_info and run the bootstrap/communicator smoke benchmark over 4 ranks (threads and
# processes), then transport_perf (put bandwidth and signal round trip of inproc, shm and ucx,
# next to memcpy and ucx_perftest). Extra arguments go to bootstrap_perf; TRANSPORT_PERF_ARGS
# (e.g. "-u sm -J transport.json") to transport_perf.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

tessera_setup
tessera_configure
tessera_build --target tessera_info bootstrap_perf transport_perf
"$BUILD_DIR/src/tools/tessera_info"
echo
"$BUILD_DIR/perf/bootstrap_perf" -n 4 "$@"
echo
"$BUILD_DIR/perf/transport_perf" ${TRANSPORT_PERF_ARGS:-}
