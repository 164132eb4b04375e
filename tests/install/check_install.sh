#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds and runs a consumer through
# find_package(tessera) and through pkg-config, as users of the installed library would.
#   check_install.sh <build dir> <consumer source dir> <scratch dir>
set -euo pipefail
build="$1"; src="$2"; scratch="$3"
rm -rf "$scratch"
mkdir -p "$scratch"
prefix="$scratch/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null

# CMake package.
cmake -S "$src" -B "$scratch/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$scratch/cmake-build" >/dev/null
export LD_LIBRARY_PATH="$prefix/lib:${LD_LIBRARY_PATH:-}"
"$scratch/cmake-build/consumer_c"
"$scratch/cmake-build/consumer_cpp"

# pkg-config.
libdir=$(ls -d "$prefix"/lib*/pkgconfig | head -1)
export PKG_CONFIG_PATH="$libdir"
cc "$src/main.c" -o "$scratch/pc_consumer" $(pkg-config --cflags --libs tessera)
"$scratch/pc_consumer"

# The installed library must not depend on libcuda (the driver is reached through entry points).
if ldd "$prefix"/lib*/libtessera.so | grep -q 'libcuda\.so'; then
  echo "libtessera.so links libcuda" >&2
  exit 1
fi
echo "install check: OK"
