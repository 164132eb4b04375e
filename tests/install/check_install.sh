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

# Every installed header stands on its own with nothing but the installed include folder on the
# include path (so none reaches into the source tree: src/, transport/, ...). tessera_mpi.h
# needs mpi.h as well and is left to the MPI consumers.
cxx="${CXX:-c++}"
headers=$(cd "$prefix/include" && find tessera -name '*.h' -o -name '*.hpp' | sort)
[ -n "$headers" ] || { echo "no headers installed under $prefix/include" >&2; exit 1; }
[ -f "$prefix/include/tessera/device/device.hpp" ] || {
  echo "the device API (tessera/device/) is not installed" >&2; exit 1; }
for h in $headers; do
  [ "$h" = tessera/tessera_mpi.h ] && continue
  printf '#include "%s"\n#include "%s"\nint main() { return 0; }\n' "$h" "$h" > "$scratch/header.cpp"
  if ! "$cxx" -std=c++20 -fsyntax-only -I"$prefix/include" "$scratch/header.cpp"; then
    echo "installed header $h does not compile with only $prefix/include" >&2
    exit 1
  fi
done

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
