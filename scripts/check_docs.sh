#!/usr/bin/env bash
# Every citation of the design in the tracked files must name something docs/DESIGN.md has, so a
# reader who follows a comment to the map finds the section it means. Forms checked:
#   DESIGN.md, "Section"[, "Section"...]   each name equals a ## or ### heading's text (a leading
#   DESIGN.md "Section"                    "N. " of a numbered heading is not part of its name)
#   DESIGN.md, principle N                 heading "### N. ..." exists
#   DESIGN.md: "a phrase"                  the phrase occurs in the doc (line breaks are spaces)
#   DESIGN.md, word)                       some heading contains the word (e.g. hazards)
#   DESIGN.md  (anything else)             a plain reference: fine
# A citation may continue on the next line (after the comment marker). Also fails when README.md
# no longer points at docs/DESIGN.md. Prints one line per unmatched citation and a summary; exits 1
# if anything is unmatched. Runs from any directory; needs git, grep, sed and awk only.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
doc=docs/DESIGN.md
self=scripts/check_docs.sh

if [[ ! -f $doc ]]; then
  echo "check_docs: $doc is missing" >&2
  exit 1
fi

status=0
if ! grep -q 'docs/DESIGN\.md' README.md; then
  echo "README.md: no longer points at docs/DESIGN.md (the design map)"
  status=1
fi

# Tracked files that mention the design, except the map itself and this script (its comment above
# shows the forms, not citations).
files=()
while IFS= read -r -d '' f; do
  [[ $f == "$doc" || $f == "$self" ]] && continue
  files+=("$f")
done < <(git grep -z -l -I -F 'DESIGN.md' -- . || true)

awk -v doc="$doc" '
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function report(what) {
  printf "%s:%d: cites \"%s\", which %s does not have\n", cfile, cline, what, doc
  bad++
}
function hasHeading(name) { return (name in heading) }
# Checks the citation whose text after "DESIGN.md" is `rest`.
function check(rest,   sep, q, name, word, n) {
  cites++
  if (rest ~ /^\x27s/) return            # "DESIGN.md'"'"'s layout": prose
  sep = substr(rest, 1, 1)
  if (sep == ":") {
    rest = trim(substr(rest, 2))
    if (rest ~ /^"/) {
      q = substr(rest, 2); n = index(q, "\"")
      if (n == 0) return
      name = substr(q, 1, n - 1)
      if (index(flat, name) == 0) report(name)
    }
    return
  }
  if (sep == ",") rest = substr(rest, 2)
  else if (sep != " " && sep != "\t") return
  rest = trim(rest)
  if (rest ~ /^"/) {
    while (rest ~ /^"/) {
      q = substr(rest, 2); n = index(q, "\"")
      if (n == 0) return
      name = substr(q, 1, n - 1)
      if (!hasHeading(name)) report(name)
      rest = trim(substr(q, n + 1))
      if (rest !~ /^,[ \t]*"/) return
      rest = trim(substr(rest, 2))
    }
    return
  }
  if (sep != ",") return
  if (match(rest, /^principle [0-9]+/)) {
    n = substr(rest, 11, RLENGTH - 10) + 0
    if (!(n in principle)) report("principle " n)
    return
  }
  if (match(rest, /^[A-Za-z][A-Za-z -]*\)/)) {
    word = tolower(substr(rest, 1, RLENGTH - 1))
    for (name in heading) if (index(tolower(name), word) > 0) return
    report(substr(rest, 1, RLENGTH - 1))
  }
}
# Scans one line (with a continuation joined on when a citation ends the line).
function scan(text, lineno,   rest, p) {
  while ((p = index(text, "DESIGN.md")) > 0) {
    rest = substr(text, p + 9)
    text = rest
    cline = lineno
    if (trim(rest) ~ /^[,:]?$/) {        # the citation goes on on the next line
      pendingText = trim(rest); pending = 1
      return
    }
    check(rest)
  }
}
FILENAME == doc {
  if ($0 ~ /^##+ /) {
    h = $0; sub(/^#+ +/, "", h); h = trim(h)
    if (match(h, /^[0-9]+\. /)) { principle[substr(h, 1, RLENGTH - 2) + 0] = 1; h = substr(h, RLENGTH + 1) }
    heading[h] = 1
  }
  line = $0; gsub(/[ \t]+/, " ", line)
  flat = flat " " trim(line)
  next
}
FNR == 1 {
  if (pending) { check(pendingText); pending = 0 }
  cfile = FILENAME
}
{
  if (pending) {
    pending = 0
    cont = $0
    sub(/^[ \t]*(\/\/+|#+|\*+|--)?[ \t]*/, "", cont)
    line = pendingText " " cont
    if (line ~ /^[,:]/) line = substr(line, 1, 1) " " trim(substr(line, 2))
    check(line)
  }
  scan($0, FNR)
}
END {
  if (pending) check(pendingText)
  if (bad > 0) {
    printf "check_docs: %d of %d citations name nothing in %s\n", bad, cites, doc
    exit 1
  }
  printf "check_docs: %d citations, all name a section of %s\n", cites, doc
}
' "$doc" "${files[@]}" || status=1

exit "$status"
