#!/usr/bin/env bash
# Installs what tessera needs to build and test, and nothing that is already there.
# Idempotent: a second run checks, finds everything, and returns in seconds.
#
# Debian/Ubuntu packages: compilers and build tools, Open MPI, UCX (+ ucx-utils for
# ucx_perftest), hwloc, GoogleTest sources and libraries, nlohmann/json (transport_perf's JSON),
# ccache, pkg-config; iproute2 and util-linux (the fault tests' network namespaces: ip, unshare);
# clang and its runtime (scripts/fuzz.sh's libFuzzer targets); SimGrid (collectives/sim,
# tessera_sim and their tests); CMake >= 3.25 from the Python
# package index where the distribution's is older; torch, pytest and numpy from it for the torch
# backend (TESSERA_SETUP_TORCH=0: not).
# Where something cannot be installed (no apt-get, no root, offline), it says what is missing
# and carries on: configure then skips each optional dependency it does not find, and stops with
# a sentence for a required one.
set -uo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config ccache
  openmpi-bin libopenmpi-dev
  libucx-dev ucx-utils
  libhwloc-dev hwloc-nox
  googletest libgtest-dev
  nlohmann-json3-dev
  iproute2 util-linux
  clang libclang-rt-14-dev
  libsimgrid-dev
)
MIN_CMAKE=3.25

warn() { echo "setup: $*" >&2; }

install_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    warn "no dpkg/apt-get here: not installing packages (optional parts will be skipped)"
    return 0
  fi
  local missing=() p status
  for p in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$p")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "setup: all ${#PACKAGES[@]} packages present"
    return 0
  fi
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      warn "not root and no sudo: please install ${missing[*]}"
      return 0
    fi
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; }; then
    warn "apt-get could not install ${missing[*]}; carrying on without them"
  fi
}

version_ge() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" == "$2" ]]; }

ensure_cmake() {
  local have=""
  command -v cmake >/dev/null 2>&1 && have=$(cmake --version | head -1 | awk '{print $3}')
  if [[ -n "$have" ]] && version_ge "$have" "$MIN_CMAKE"; then return 0; fi
  warn "cmake ${have:-absent} is older than $MIN_CMAKE; installing it from the Python package index"
  if ! python3 -m pip install -q "cmake>=$MIN_CMAKE"; then
    warn "could not install cmake >= $MIN_CMAKE; configure will say so"
  fi
}

# CUTLASS headers for the fused GEMM kernels: the nvidia-cutlass wheel carries them (under
# cutlass_library/source/include). --no-deps: its Python dependencies (cuda-python, scipy...) are
# for its Python front end, which the build never imports. Only where nvcc exists.
ensure_cutlass() {
  command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]] || return 0
  if python3 -c "import importlib.util as u, sys; sys.exit(0 if u.find_spec('cutlass_library') else 1)" 2>/dev/null; then
    echo "setup: CUTLASS headers present (nvidia-cutlass)"
    return 0
  fi
  echo "setup: installing CUTLASS headers (pip install --no-deps nvidia-cutlass)"
  if ! python3 -m pip install -q --no-deps nvidia-cutlass; then
    warn "could not install nvidia-cutlass; configure will skip the fused GEMM kernels and say so"
  fi
}

# torch (pinned; with its CUDA libraries about 5.4 GB, about 90 s here), pytest and numpy: the
# torch.distributed backend (python/) builds against it and tests/torch runs it. An installed torch
# of another version is kept: the backend builds against whichever torch is there.
TORCH_PIN="torch==2.15.0"
ensure_torch() {
  [[ "${TESSERA_SETUP_TORCH:-1}" == "1" ]] || return 0
  local missing=()
  python3 -c "import torch" 2>/dev/null || missing+=("$TORCH_PIN")
  python3 -c "import pytest" 2>/dev/null || missing+=(pytest)
  python3 -c "import numpy" 2>/dev/null || missing+=(numpy)
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "setup: torch $(python3 -c 'import torch; print(torch.__version__)'), pytest and numpy present"
    return 0
  fi
  echo "setup: installing ${missing[*]} (pip) for the torch backend and its tests"
  if ! python3 -m pip install -q "${missing[@]}"; then
    warn "could not install ${missing[*]}; configure skips tessera_torch and its tests and says so"
  fi
}

# matplotlib, for the benchmarks' plot (perf/plot.py): only when scripts/bench.sh asks.
ensure_matplotlib() {
  [[ "${TESSERA_SETUP_BENCH:-0}" == "1" ]] || return 0
  if python3 -c "import matplotlib" 2>/dev/null; then
    echo "setup: matplotlib present"
    return 0
  fi
  echo "setup: installing matplotlib (pip) for perf/plot.py"
  if ! python3 -m pip install -q matplotlib; then
    warn "could not install matplotlib; bench.sh prints its tables without the plot"
  fi
}

install_packages
ensure_cmake
ensure_cutlass
ensure_torch
ensure_matplotlib
exit 0
