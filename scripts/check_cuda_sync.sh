#!/usr/bin/env bash
# Refuses CUDA calls that wait for an idle device in the library's code (src/, transport/,
# collectives/, fused/, python/csrc/) outside the short, commented allow-list
# scripts/cuda_sync_allow.txt (DESIGN.md, "Known hazards"): while a resident grid runs, such a
# call never returns. Frees go through releaseWhenIdle (src/core/idle_release.hpp); a wait for
# the device is a wait for a stream or an event. Run by scripts/test.sh; prints each offending
# line. Usage: scripts/check_cuda_sync.sh [root]
set -euo pipefail
ROOT="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
ALLOW="$ROOT/scripts/cuda_sync_allow.txt"
# Runtime calls that synchronize the device or the context, and the driver's unmap and release
# (reached through the driver table, d.memUnmap(...)). cudaMemcpy / cudaMemset without Async run
# on the legacy stream and block the host: the library uses the Async forms on its own streams.
RUNTIME='cudaFree|cudaFreeHost|cudaFreeArray|cudaDeviceSynchronize|cudaDeviceReset|cudaHostUnregister|cudaIpcCloseMemHandle|cudaMemcpy|cudaMemset|cudaMemcpy2D|cudaMemcpyToSymbol|cudaMemcpyFromSymbol|cudaThreadSynchronize'
TABLE='memUnmap|memRelease|memFree|memFreeHost|ctxSynchronize|memHostUnregister'
DRIVER='cuMemFree|cuMemFreeHost|cuMemUnmap|cuMemRelease|cuCtxSynchronize|cuMemHostUnregister'
bad=0
checked=0
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  text=${rest#*:}
  # Comments and string literals (log sentences) name calls without making them.
  code=$(sed -E 's://.*$::; s/"([^"\\]|\\.)*"/""/g' <<<"$text")
  calls=$(grep -oE "(^|[^A-Za-z0-9_:])($RUNTIME|$DRIVER)[[:space:]]*\(|(\.|->)($TABLE)[[:space:]]*\(" <<<"$code" |
    sed -E 's/^[^A-Za-z]*//; s/[[:space:]]*\($//' || true)
  [[ -z "$calls" ]] && continue
  rel=${file#"$ROOT"/}
  for c in $calls; do
    checked=$((checked + 1))
    if ! awk -v f="$rel" -v c="$c" '!/^#/ && $1 == f && $2 == c { found = 1 } END { exit !found }' "$ALLOW"; then
      echo "check_cuda_sync: $rel:$line: $c waits for an idle device; a resident grid keeps it busy (DESIGN.md, \"Known hazards\"): release through releaseWhenIdle, wait for a stream, or add a reasoned line to scripts/cuda_sync_allow.txt"
      echo "    $(sed -E 's/^[[:space:]]+//' <<<"$text")"
      bad=$((bad + 1))
    fi
  done
done < <(grep -rnE "($RUNTIME|$DRIVER|$TABLE)[[:space:]]*\(" "$ROOT/src" "$ROOT/transport" "$ROOT/collectives" \
  "$ROOT/fused" "$ROOT/python/csrc" --include='*.cpp' --include='*.cu' --include='*.hpp' \
  --include='*.cuh' --include='*.h' 2>/dev/null)
if [[ $bad -gt 0 ]]; then
  echo "check_cuda_sync: $bad synchronizing CUDA call(s) outside scripts/cuda_sync_allow.txt"
  exit 1
fi
echo "check_cuda_sync: $checked synchronizing CUDA calls, each on the allow-list"
