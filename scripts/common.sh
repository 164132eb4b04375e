# Shared by scripts/test.sh and scripts/bench.sh: install, configure and build.
# Sourced, not run. Honors BUILD_DIR (default: build), CMAKE_ARGS (extra -D flags), JOBS.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

tessera_setup() {
  if [[ "${SKIP_SETUP:-0}" != "1" ]]; then
    "$ROOT/scripts/setup.sh"
  fi
}

tessera_configure() {
  local gen=()
  if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
  # Warnings are errors here, as in CI.
  cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" -DTESSERA_WERROR=ON ${CMAKE_ARGS:-}
}

tessera_build() {
  cmake --build "$BUILD_DIR" --parallel "$JOBS" "$@"
}
