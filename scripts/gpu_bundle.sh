#!/usr/bin/env bash
# Builds what perf/gpu_check.sh runs on a GPU machine, here, and packs it into one git-ignored
# folder (default .gpu-bundle/) to carry there, so that the GPU's minutes go to tests and not to
# compilers (issue 28). The GPU machine has CUDA, CMake, ninja, Python and PyTorch but no Debian
# packages: the build leaves out MPI, UCX, hwloc and SimGrid (each is detected and skipped; see
# README, "Tests"), links GoogleTest and cudart statically, and the bundle carries the one shared
# library of ours (libtessera.so.0, for the NCCL drop-in). cuBLAS comes from the GPU machine's CUDA.
#
#   scripts/gpu_bundle.sh                 # build-gpu/, sm_90, then .gpu-bundle/
#   TESSERA_CUDA_ARCHS=80 scripts/gpu_bundle.sh
#
# Then, on the GPU machine (the device tool: carry ".gpu-bundle"):
#   perf/gpu_check.sh --bundle .gpu-bundle
#
# The bundle: bin.tar.xz (the binaries, xz: Python's tarfile unpacks it where xz is missing),
# lib.tar.xz (libtessera.so and the public headers: a prefix to build the PyTorch extension
# against there, against that machine's torch), model/ (the workloads perf/gpu_model_check.py
# times, written by the host build's tessera_sim: SIM_BUILD_DIR, default build/), manifest.txt
# (commit, flags, what each binary is, sizes).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
OUTDIR="${GPU_BUNDLE_DIR:-$ROOT/.gpu-bundle}"
ARCHS="${TESSERA_CUDA_ARCHS:-90}"
JOBS="${JOBS:-$(nproc)}"
NCCL_TESTS_DIR="${NCCL_TESTS_DIR:-$ROOT/.nccl-tests}"
# The device tool carries at most 64 MiB per call, working tree included.
LIMIT_BYTES=$((48 << 20))

command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null 2>&1 || { echo "gpu_bundle: no nvcc here: nothing to build" >&2; exit 1; }

start=$(date +%s)
mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WITH_CUDA=ON \
  -DTESSERA_CUDA_ARCHS="$ARCHS" -DTESSERA_WITH_MPI=OFF -DTESSERA_WITH_UCX=OFF \
  -DTESSERA_WITH_HWLOC=OFF -DTESSERA_WITH_SIMGRID=OFF -DTESSERA_WITH_TORCH=OFF >"$BUILD/configure.log"
# name:build path, in the order gpu_check.sh uses them.
BINARIES=(
  tessera_info:src/tools/tessera_info
  blocking_probe:perf/blocking_probe
  test_device_kernels_gpu:tests/unit/collectives/test_device_kernels_gpu
  test_gpu_convert:tests/gpu/test_gpu_convert
  test_gpu_comm:tests/gpu/test_gpu_comm
  test_gpu_p2p:tests/gpu/test_gpu_p2p
  test_gpu_cuda_ipc:tests/gpu/test_gpu_cuda_ipc
  test_gpu_coll:tests/gpu/test_gpu_coll
  test_gpu_coll_stream:tests/gpu/test_gpu_coll_stream
  test_gpu_sendrecv:tests/gpu/test_gpu_sendrecv
  test_gpu_windows:tests/gpu/test_gpu_windows
  test_gpu_fused:tests/gpu/test_gpu_fused
  gpu_transport_bw:perf/gpu_transport_bw
  all_reduce_perf:perf/all_reduce_perf
  all_gather_perf:perf/all_gather_perf
  reduce_scatter_perf:perf/reduce_scatter_perf
  sendrecv_perf:perf/sendrecv_perf
  fused_perf:perf/fused_perf
  test_nccl_threads:tests/nccl/test_nccl_threads
)
targets=()
for b in "${BINARIES[@]}"; do targets+=("${b%%:*}"); done
targets+=(tessera_nccl tessera)
# -k 0: a target that fails (the CUTLASS kernels, say) leaves the others built; the bundle says
# which are missing and gpu_check.sh reports them as not built.
build_rc=0
cmake --build "$BUILD" --parallel "$JOBS" --target "${targets[@]}" -- -k 0 || build_rc=$?

rm -rf "$OUTDIR"
mkdir -p "$OUTDIR/stage/bin" "$OUTDIR/stage/lib/lib" "$OUTDIR/stage/lib/include"
manifest="$OUTDIR/manifest.txt"
{
  echo "commit $(git -C "$ROOT" rev-parse HEAD)$(git -C "$ROOT" diff --quiet HEAD -- . ':!.gpu-bundle' || echo ' (+ uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), archs $ARCHS, Release"
  echo "build exit code $build_rc"
} >"$manifest"
missing=0
for b in "${BINARIES[@]}"; do
  name="${b%%:*}" path="$BUILD/${b#*:}"
  if [[ -x "$path" ]]; then
    cp "$path" "$OUTDIR/stage/bin/$name"
    echo "bin $name $(stat -c %s "$path")" >>"$manifest"
  else
    echo "missing $name (did not build; see the build output above)" | tee -a "$manifest"
    missing=$((missing + 1))
  fi
done
# The drop-in and the library it needs.
if [[ -e "$BUILD/nccl/libnccl.so.2" ]]; then
  cp -L "$BUILD/nccl/libnccl.so.2" "$OUTDIR/stage/bin/libnccl.so.2"
  cp -L "$BUILD/src/libtessera.so.0" "$OUTDIR/stage/bin/libtessera.so.0"
  echo "bin libnccl.so.2 (the drop-in) and libtessera.so.0" >>"$manifest"
else
  echo "missing libnccl.so.2 (the drop-in)" | tee -a "$manifest"
fi
# nccl-tests over the drop-in, where a clone is there (.nccl-tests/; never committed).
if [[ -d "$NCCL_TESTS_DIR/src" ]]; then
  home="$BUILD/nccl-home"
  mkdir -p "$home/lib"
  cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
  ln -sfn "$(cat "$BUILD/nccl/include_dir.txt")" "$home/include"
  ln -sf "$BUILD/nccl/libnccl.so.2" "$home/lib/libnccl.so"
  ln -sf "$cuda_home/lib64/libcudart.so" "$home/lib/libcudart.so"
  if make -C "$NCCL_TESTS_DIR" -j"$JOBS" NCCL_HOME="$home" CUDA_HOME="$cuda_home" \
      CUDA_LIB="$home/lib" NVCC_GENCODE="-gencode=arch=compute_${ARCHS%%;*},code=sm_${ARCHS%%;*}" \
      BUILDDIR="$BUILD/nccl-tests" src.build >"$BUILD/nccl-tests.log" 2>&1; then
    for t in all_reduce all_gather reduce_scatter; do
      cp "$BUILD/nccl-tests/${t}_perf" "$OUTDIR/stage/bin/nccltests_${t}_perf"
    done
    echo "bin nccltests_*_perf (nccl-tests $(git -C "$NCCL_TESTS_DIR" describe --always 2>/dev/null))" >>"$manifest"
  else
    echo "missing nccl-tests (did not build against the drop-in: $BUILD/nccl-tests.log)" | tee -a "$manifest"
  fi
else
  echo "missing nccl-tests (no $NCCL_TESTS_DIR)" >>"$manifest"
fi
# An install-like prefix (include/, lib/libtessera.so) for the PyTorch extension built there
# against that machine's torch (python/setup.py, CMAKE_PREFIX_PATH).
if [[ -e "$BUILD/src/libtessera.so.0" ]]; then
  cp -L "$BUILD/src/libtessera.so.0" "$OUTDIR/stage/lib/lib/libtessera.so.0"
  ln -s libtessera.so.0 "$OUTDIR/stage/lib/lib/libtessera.so"
  cp -r "$ROOT/include/tessera" "$OUTDIR/stage/lib/include/"
  cp "$BUILD/include/tessera/version.h" "$OUTDIR/stage/lib/include/tessera/"
fi
# The workloads whose ops perf/gpu_check.sh's `model` stage times (perf/gpu_model_check.py): the
# host build's tessera_sim writes them (this build has no SimGrid).
SIM_BUILD="${SIM_BUILD_DIR:-$ROOT/build}"
if python3 "$ROOT/perf/gpu_model_check.py" prepare "$OUTDIR/model" --build "$SIM_BUILD" >>"$manifest" 2>&1; then
  :
else
  echo "missing model workloads (tessera_sim in $SIM_BUILD: see above)" | tee -a "$manifest"
fi
(cd "$OUTDIR/stage" && tar cf - bin | xz -9 -T1 >"$OUTDIR/bin.tar.xz")
(cd "$OUTDIR/stage" && tar cf - lib | xz -9 -T1 >"$OUTDIR/lib.tar.xz")
rm -rf "$OUTDIR/stage"
bytes=$(du -cb "$OUTDIR"/* | tail -1 | cut -f1)
echo "bundle $bytes bytes (bin.tar.xz $(stat -c %s "$OUTDIR/bin.tar.xz"), lib.tar.xz $(stat -c %s "$OUTDIR/lib.tar.xz"))" >>"$manifest"
cat "$manifest"
echo "gpu_bundle: $OUTDIR, $((bytes >> 20)) MiB, in $(( $(date +%s) - start )) s"
if [[ $bytes -gt $LIMIT_BYTES ]]; then
  echo "gpu_bundle: over $((LIMIT_BYTES >> 20)) MiB: the device tool carries 64 MiB with the tree" >&2
  exit 1
fi
[[ $missing -eq 0 && $build_rc -eq 0 ]]
