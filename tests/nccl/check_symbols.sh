#!/usr/bin/env bash
# Symbol coverage of the NCCL drop-in: check_symbols.sh LIBNCCL NCCL_H [LIBTORCH_CUDA]
#  - the SONAME is libnccl.so.2;
#  - every function nccl.h declares is exported, under nccl* and pnccl*;
#  - every nccl* symbol libtorch_cuda.so imports (nm -D --undefined-only) is exported;
#  - nothing but nccl*/pnccl* is exported (tessera's own symbols stay in libtessera.so).
set -euo pipefail
lib=$1 header=$2 torch=${3:-}
fail=0
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
echo "SONAME: $soname"
[[ "$soname" == "libnccl.so.2" ]] || { echo "FAIL: SONAME is '$soname', not libnccl.so.2"; fail=1; }

exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWiA]$/ {print $3}' | sort -u)
declared=$(grep -oE '^[[:space:]]*(ncclResult_t|const char ?\*|void)[[:space:]]+nccl[A-Za-z0-9_]+[[:space:]]*\(' "$header" \
           | sed -E 's/^[[:space:]]*(ncclResult_t|const char ?\*|void)[[:space:]]+//; s/[[:space:]]*\($//' | sort -u)
# The host functions of NCCL's device API, declared in the nccl_device headers beside nccl.h.
devdir=$(dirname "$header")/nccl_device
if [[ -d "$devdir" ]]; then
  declared=$( (echo "$declared"; grep -hoE 'NCCL_EXTERN_C __host__ [A-Za-z_]+\*? +nccl[A-Za-z0-9_]+' "$devdir"/*.h \
               | grep -oE 'nccl[A-Za-z0-9_]+$') | sort -u)
fi
ndecl=$(echo "$declared" | wc -l)
missing=0
for f in $declared; do
  for name in "$f" "p$f"; do
    if ! grep -qx "$name" <<<"$exported"; then echo "FAIL: $name (declared in $header) is not exported"; missing=$((missing + 1)); fi
  done
done
echo "nccl.h and nccl_device/: $ndecl functions declared; missing exports: $missing"
[[ $missing -eq 0 ]] || fail=1

if [[ -n "$torch" ]]; then
  imports=$(nm -D --undefined-only "$torch" | grep -oE '\bnccl[A-Za-z0-9_]+' | sort -u)
  nimp=$(echo "$imports" | wc -l)
  tmissing=0
  for f in $imports; do
    if ! grep -qx "$f" <<<"$exported"; then echo "FAIL: $f (imported by $torch) is not exported"; tmissing=$((tmissing + 1)); fi
  done
  echo "libtorch_cuda.so: $nimp nccl symbols imported; missing exports: $tmissing"
  [[ $tmissing -eq 0 ]] || fail=1
else
  echo "libtorch_cuda.so: not checked (torch is not installed)"
fi

others=$(grep -vE '^p?nccl' <<<"$exported" || true)
if [[ -n "$others" ]]; then echo "FAIL: exported besides nccl*/pnccl*:"; echo "$others" | head -20; fail=1; fi
echo "exported: $(echo "$exported" | wc -l) symbols"
[[ $fail -eq 0 ]] && echo "symbol coverage: OK"
exit $fail
