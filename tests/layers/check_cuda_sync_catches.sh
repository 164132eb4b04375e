#!/usr/bin/env bash
# scripts/check_cuda_sync.sh must fail on a synchronizing CUDA call outside its allow-list and name
# it, and pass a tree whose such calls are all listed (or only named in comments and sentences).
set -euo pipefail
script="$1"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/scripts" "$t/src/core" "$t/transport/cuda_ipc" "$t/collectives" "$t/fused" "$t/python/csrc"
printf '# file call why\ntransport/cuda_ipc/ok.cpp cudaFree inside releaseWhenIdle\n' \
  >"$t/scripts/cuda_sync_allow.txt"
printf 'releaseWhenIdle(d, [p] { cudaFree(p); });\n' >"$t/transport/cuda_ipc/ok.cpp"
printf '// cudaFree(p) would wait here\nTSR_WARN("cudaFree(%%p) failed", p);\nx = cudaFreeAsync(p, s);\n' \
  >"$t/src/core/ok.cpp"
"$script" "$t" >"$t/good.out" || {
  cat "$t/good.out"
  echo "FAIL: a tree whose synchronizing calls are listed was refused"
  exit 1
}
printf 'void f(void* p) {\n  cudaFree(p);\n}\n' >"$t/collectives/bad.cpp"
printf 'void g() { d.memUnmap(ptr, n); cudaDeviceSynchronize(); }\n' >"$t/fused/bad.cu"
if "$script" "$t" >"$t/bad.out"; then
  cat "$t/bad.out"
  echo "FAIL: unlisted synchronizing calls passed"
  exit 1
fi
cat "$t/bad.out"
for want in 'collectives/bad.cpp:2: cudaFree' 'fused/bad.cu:1: memUnmap' \
    'fused/bad.cu:1: cudaDeviceSynchronize'; do
  grep -q "^check_cuda_sync: $want " "$t/bad.out" || { echo "FAIL: $want is not named"; exit 1; }
done
echo "check_cuda_sync.sh names every unlisted synchronizing call"
