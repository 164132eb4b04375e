#!/usr/bin/env bash
# Installs what tessera needs to build and test, and nothing that is already there.
# Idempotent: a second run checks, finds everything, and returns in seconds.
#
# Debian/Ubuntu packages: compilers and build tools, Open MPI, UCX (+ ucx-utils for
# ucx_perftest), hwloc, GoogleTest sources and libraries, ccache, pkg-config.
# Where apt-get is unavailable (e.g. a GPU machine with only CUDA and CMake), it reports what is
# missing and carries on: the build detects and skips each optional dependency.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config ccache
  openmpi-bin libopenmpi-dev
  libucx-dev ucx-utils
  libhwloc-dev hwloc-nox
  googletest libgtest-dev
)

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$p")
  done
else
  echo "setup: no dpkg on this machine; not installing packages (optional parts will be skipped)"
  exit 0
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup: not root and no sudo; please install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
