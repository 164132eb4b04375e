#!/usr/bin/env bash
# Compiler launcher of the collectives layer's CUDA files (collectives/CMakeLists.txt): runs the
# compile (the rest of the command line, ccache first where the build uses it) and keeps ptxas's
# resource report (those files compile with -Xptxas=-v) in REPORT_DIR/<file>.txt, which the test
# device_kernels.no_spill reads. The report comes from the library's own compile, so checking it
# costs no second device compile; ccache replays the report with a cached object. The build's
# output shows what the compiler printed except the report's lines (warnings and errors stay).
#   ptxas_report.sh REPORT_DIR <compiler command...>
set -u
dir=$1
shift
out=""
prev=""
for a in "$@"; do
  [[ $prev == "-o" ]] && out=$a
  prev=$a
done
name=$(basename "${out:-unknown}")
name=${name%.o}
name=${name%.cu}
mkdir -p "$dir"
tmp=$(mktemp "$dir/.$name.XXXXXX")
"$@" 2>"$tmp"
rc=$?
if [[ $rc -ne 0 ]]; then
  cat "$tmp" >&2
  rm -f "$tmp"
  exit $rc
fi
grep -Ev '^ptxas info +:|^ +[0-9]+ bytes stack frame' "$tmp" >&2
# Written under its final name last: a failed compile leaves no stale report.
chmod 644 "$tmp"
mv -f "$tmp" "$dir/$name.txt"
exit 0
