#!/usr/bin/env bash
# Builds tessera without CUDA under a sanitizer and runs the unit tests with it.
#
#   scripts/sanitize.sh asan|ubsan|tsan|asan+ubsan   every unit test (tests/unit/*)
#   scripts/sanitize.sh ci                           CI: ASan+UBSan, the unit tests of core,
#                                                    bootstrap, transport and collectives
#   scripts/sanitize.sh tsan-ci                      CI: TSan, the threaded unit tests of transport
#                                                    and collectives (tests/CMakeLists.txt,
#                                                    TESSERA_TSAN_SUBSET: ctest label unit-tsan)
# Extra arguments go to ctest (e.g. scripts/sanitize.sh tsan -R Bootstrap). LAYERS="core bootstrap"
# builds and runs only those layers' unit tests (folders of tests/unit).
#
# Build folder: build-sanitize-<sanitizers> (ci shares build-sanitize-asan+ubsan; BUILD_DIR
# overrides). Runtime options and suppressions come from tests/sanitize/ (each suppression says
# why it is there). Any finding fails its test:
# halt_on_error for ASan/TSan, -fno-sanitize-recover for UBSan. Honors JOBS (default: nproc),
# SKIP_SETUP (default 1 here: scripts/setup.sh is not run), CMAKE_ARGS (extra -D flags).
set -euo pipefail

mode="${1:-}"
case "$mode" in
  asan | ubsan | tsan | asan+ubsan) sanitize="$mode"; layers=(core bootstrap topology comm transport collectives fused) ;;
  ci) sanitize="asan+ubsan"; layers=(core bootstrap transport collectives) ;;
  tsan-ci) sanitize="tsan"; layers=() ;;
  *)
    echo "usage: $0 asan|ubsan|tsan|asan+ubsan|ci|tsan-ci [ctest arguments...]" >&2
    exit 2
    ;;
esac
shift
if [[ -n "${LAYERS:-}" ]]; then read -r -a layers <<<"$LAYERS"; fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$ROOT/build-sanitize-$sanitize}"
export SKIP_SETUP="${SKIP_SETUP:-1}"
source "$ROOT/scripts/common.sh"

# No CUDA (nvcc's host code is not instrumented), no torch (an instrumented extension cannot be
# loaded into an uninstrumented python), no perf binaries (not tests). -O1 -g1: what the
# sanitizers' authors advise (fast enough, stacks with file:line) and ~40% less compile time
# than -O2 -g on a 2-core machine; no -DNDEBUG, so assertions are on too.
sanitize_configure() {
  command -v ninja >/dev/null 2>&1 || { echo "sanitize.sh: needs ninja (ninja-build)" >&2; exit 2; }
  # Warnings are errors, as in CI (scripts/common.sh).
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DTESSERA_WERROR=ON -DTESSERA_SANITIZE="$sanitize" \
    -DTESSERA_WITH_CUDA=OFF -DTESSERA_WITH_TORCH=OFF -DTESSERA_BUILD_PERF=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1" ${CMAKE_ARGS:-}
}

SAN="$ROOT/tests/sanitize"
# Runtime options; every process the tests start (forked ranks, tools) inherits them.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0:strict_init_order=1:\
check_initialization_order=1:print_summary=1"
export LSAN_OPTIONS="suppressions=$SAN/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:print_summary=1:suppressions=$SAN/ubsan.supp"
# die_after_fork=0: the shm fd server's test forks a process with threads and the child starts
# its own server thread, which TSan refuses by default ("starting new threads after
# multi-threaded fork is not supported"); the child runs no code TSan needs to check.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4:\
suppressions=$SAN/tsan.supp:print_suppressions=0:die_after_fork=0"

# UCX's libucm patches mmap/madvise (its memory hooks) in every process that links UCX; glibc's
# madvise of an exiting thread's stack then enters ucm's rwlock through TSan's interceptor and
# crashes (SIGSEGV in __tsan::MutexPreReadLock from ucm_event_enter, any test with threads).
# Without the hooks UCX does not cache registrations across unmaps, which the tests don't need.
export UCX_MEM_MMAP_HOOK_MODE=none

# TSan runs code 5-15 times slower: the ordering stress test's 100,000 put+signal pairs through
# the proxy then pass its 60 s bound; 20,000 still cycle its ring of 8 slots 2,500 times.
if [[ "$sanitize" == tsan ]]; then export TESSERA_TEST_ORDERING_COUNT="${TESSERA_TEST_ORDERING_COUNT:-20000}"; fi

# hwloc's pci plugin keeps libpciaccess's state in that library's globals, and hwloc unloads the
# plugin (and libpciaccess) when the last topology is destroyed: LSan then finds the state with
# no root and reports it leaked (frames in "<unknown module>"; with libpciaccess preloaded, so
# that it stays, nothing is reported). This machine has no PCI device tessera looks at (no GPU,
# no RDMA NIC), and the topology tests read XML files, so the sanitizer runs go without it.
export HWLOC_COMPONENTS=-pci

# CPU seconds (user + system) of this shell's finished children: on a loaded machine the wall
# time says little, CPU / cores estimates a dedicated machine's.
# `times` runs here, not in a pipeline or $(...): a forked subshell's counts of children start at 0.
child_cpu() { # sets cpu
  local f
  f=$(mktemp)
  times >"$f"
  cpu=$(tail -1 "$f" | sed 's/[ms]/ /g' | awk '{printf "%d", $1*60+$2+$3*60+$4}')
  rm -f "$f"
}

start=$(date +%s)
tessera_setup
sanitize_configure
# Only what the chosen tests run: each layer's unit test folder (Ninja's <dir>/all targets) and
# the tools that the transport and collectives tests call (tessera_info, tessera_plan,
# tessera_tune).
targets=()
for l in "${layers[@]}"; do targets+=("tests/unit/$l/all"); done
case " ${layers[*]} " in
  *" transport "* | *" collectives "*) targets+=(tessera_info tessera_plan tessera_tune) ;;
esac
# tsan-ci: the subset's own target (tests/CMakeLists.txt); its tests carry the label unit-tsan.
if [[ "$mode" == tsan-ci ]]; then targets=(tsan_subset); fi
tessera_build --target "${targets[@]}"
built=$(date +%s)
child_cpu
build_cpu=$cpu

# ctest run in a folder of the build tree runs only the tests declared there, which is how the
# layers are picked (gtest's test names do not carry the binary's). Label unit only.
cd "$BUILD_DIR"
set +e
dirs=()
for l in "${layers[@]}"; do dirs+=("tests/unit/$l"); done
label=unit
exclude=()
if [[ "$mode" == tsan-ci ]]; then
  dirs=(tests/unit)
  label=unit-tsan
  # The subset's tests that CI leaves out for time (TESSERA_TSAN_SKIP, tests/CMakeLists.txt).
  # Without the file an empty -E would leave every test out and pass with none run.
  skip="$BUILD_DIR/tsan_ci_exclude.regex"
  [[ -s "$skip" ]] || { echo "sanitize.sh: $skip is missing (tests/CMakeLists.txt writes it)" >&2; exit 2; }
  exclude=(-E "$(cat "$skip")")
fi
rc=0
log="$BUILD_DIR/sanitize-ctest.log"
: >"$log"
for d in "${dirs[@]}"; do
  echo "=== $mode: ctest in $d"
  ctest --test-dir "$BUILD_DIR/$d" -L "$label" ${exclude[@]+"${exclude[@]}"} --output-on-failure \
    --parallel "$JOBS" --timeout 600 "$@" 2>&1 | tee -a "$log"
  r=${PIPESTATUS[0]}
  [[ $r -ne 0 ]] && rc=$r
done
set -e
end=$(date +%s)
totals=$(awk '/tests passed, [0-9]+ tests failed out of/ {f+=$4; n+=$NF} END {print n-f " passed, " f " failed of " n}' "$log")
child_cpu
test_cpu=$(( cpu - build_cpu ))
echo "scripts/sanitize.sh $mode ($sanitize): $totals; ctest exit code $rc"
echo "scripts/sanitize.sh $mode: wall time: build $(( built - start )) s, tests $(( end - built )) s, \
total $(( end - start )) s; CPU time: build ${build_cpu} s, tests ${test_cpu} s"
exit $rc
