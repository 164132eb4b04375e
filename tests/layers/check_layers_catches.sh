#!/usr/bin/env bash
# scripts/check_layers.sh must fail on an include that reaches up a layer and name it, and pass a
# tree whose includes go down only. Builds both trees in a temporary folder.
set -euo pipefail
script="$1"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/transport" "$t/src/core" "$t/collectives/tuner" "$t/fused"
printf '#include "core/status.hpp"\n#include "transport/memory.hpp"\n' >"$t/transport/ok.cpp"
printf '#include "core/status.hpp"\n' >"$t/src/core/ok.hpp"
printf '#include "collectives/plan/plan.hpp"\n#include "transport/memory.hpp"\n' \
  >"$t/collectives/tuner/ok.cpp"
"$script" "$t" >"$t/good.out" || {
  cat "$t/good.out"
  echo "FAIL: a tree whose includes go down was refused"
  exit 1
}
printf '#include "collectives/exec/engine.hpp"\n' >"$t/collectives/tuner/up.cpp"
printf '#include "collectives/plan/plan.hpp"\n' >"$t/fused/sibling.cpp"
if "$script" "$t" >"$t/bad.out"; then
  cat "$t/bad.out"
  echo "FAIL: includes that reach up passed"
  exit 1
fi
cat "$t/bad.out"
grep -q '^collectives/tuner/up.cpp:1: collectives/tuner includes "collectives/exec/engine.hpp"' \
  "$t/bad.out" || { echo "FAIL: the tuner's include of exec is not named"; exit 1; }
grep -q '^fused/sibling.cpp:1: fused includes "collectives/plan/plan.hpp"' "$t/bad.out" ||
  { echo "FAIL: fused's include of collectives is not named"; exit 1; }
echo "check_layers.sh names both includes that reach up"
