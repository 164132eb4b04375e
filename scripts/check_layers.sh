#!/usr/bin/env bash
# Fails when an #include reaches up a layer (docs/DESIGN.md, "Layout"). Every quoted include of a
# library file names its layer by its first folder; a file may include its own layer and the
# layers below it, nothing else. Inside collectives the folders are layers too:
# plan -> algorithms -> tuner -> exec -> sim. The public headers (include/tessera) include only
# each other. The build enforces the same for the library's layers (each OBJECT library sees only
# its own and lower layers' folders: src/CMakeLists.txt, tessera_layer); this check also covers
# the folders a compiler never sees (headers no source of the layer includes yet, CUDA files of a
# build without CUDA) and the order inside collectives.
# Prints each offending include as `file:line: <layer> includes "<path>" (<layer>)`, then one line;
# exits 1 when any. An argument names another tree to check (the test of this script does).
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}"

# The layer of a path in the tree (a file) or of an include's first folders.
layer_of() {
  case "$1" in
    src/core/* | core/*) echo core ;;
    src/bootstrap/* | bootstrap/*) echo bootstrap ;;
    src/topology/* | topology/*) echo topology ;;
    transport/*) echo transport ;;
    collectives/plan/*) echo collectives/plan ;;
    collectives/algorithms/*) echo collectives/algorithms ;;
    collectives/tuner/*) echo collectives/tuner ;;
    collectives/exec/*) echo collectives/exec ;;
    collectives/sim/*) echo collectives/sim ;;
    collectives/*) echo collectives ;;
    fused/*) echo fused ;;
    workload/*) echo workload ;;
    src/comm/* | comm/*) echo comm ;;
    src/nccl/* | nccl/*) echo nccl ;;
    include/tessera/* | tessera/*) echo public ;;
    *) echo "" ;;
  esac
}

# What each layer may include (its own layer is always allowed).
allowed() {
  local below
  case "$1" in
    public) below="" ;;
    core) below="public" ;;
    bootstrap | topology) below="public core" ;;
    transport) below="public core bootstrap topology" ;;
    collectives/plan) below="public core bootstrap topology transport collectives" ;;
    collectives/algorithms) below="public core bootstrap topology transport collectives collectives/plan" ;;
    collectives/tuner) below="public core bootstrap topology transport collectives collectives/plan collectives/algorithms" ;;
    collectives/exec) below="public core bootstrap topology transport collectives collectives/plan collectives/algorithms collectives/tuner" ;;
    collectives/sim) below="public core bootstrap topology transport collectives collectives/plan collectives/algorithms collectives/tuner collectives/exec" ;;
    collectives) below="public core bootstrap topology transport" ;;
    fused) below="public core bootstrap topology transport" ;;
    # The workload simulator: above the simulated collectives and the fused layer's tile order.
    workload) below="public core bootstrap topology transport collectives collectives/plan collectives/algorithms collectives/tuner collectives/exec collectives/sim fused" ;;
    comm) below="public core bootstrap topology transport collectives collectives/plan collectives/algorithms collectives/tuner collectives/exec fused" ;;
    # The NCCL drop-in uses the public API only, as any user would.
    nccl) below="public" ;;
    *) below="" ;;
  esac
  echo "$1 $below"
}

bad=0
checked=0
files=0
while IFS= read -r file; do
  from=$(layer_of "$file")
  [[ -z "$from" ]] && continue
  ok=" $(allowed "$from") "
  files=$((files + 1))
  while IFS=: read -r line inc; do
    [[ -z "$inc" ]] && continue
    to=$(layer_of "$inc")
    [[ -z "$to" ]] && continue # same folder (no slash) or a third-party header
    checked=$((checked + 1))
    if [[ "$ok" != *" $to "* ]]; then
      echo "$file:$line: $from includes \"$inc\" ($to), a layer it may not reach"
      bad=$((bad + 1))
    fi
  done < <(grep -n -o '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' "$file" |
    sed -E 's/^([0-9]+):.*"([^"]*)"$/\1:\2/' || true)
done < <(
  folders=(src/core src/bootstrap src/topology transport collectives fused workload src/comm
    src/nccl include/tessera)
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files "${folders[@]}"
  else
    for f in "${folders[@]}"; do [[ -d "$f" ]] && find "$f" -type f; done
  fi | grep -E '\.(h|hpp|cpp|cu|cuh|inc|in)$' || true
)

if ((bad > 0)); then
  echo "check_layers: $bad of $checked includes in $files files reach up a layer (docs/DESIGN.md, \"Layout\")"
  exit 1
fi
echo "check_layers: $checked includes in $files files, none reaches up a layer"
