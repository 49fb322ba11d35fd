#!/usr/bin/env bash
# Fails when a file in src has more than 800 lines or a function in src more
# than 150 (docs/testing.md, "Size checks"). A function is counted from the
# line that opens its body at column 0 or 2 ("{" ending a definition line) to
# its closing brace at the same indentation; lambdas and blocks inside a
# function count towards it.
#
# ALLOWED lists known offenders still being split (a path: the file and its
# functions); the list is meant to be empty, and an entry that no longer
# offends fails the check until it is removed.
# Usage: scripts/check-sizes.sh [source root]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
readonly max_file=800 max_function=150

ALLOWED=(
)

find src -type f \( -name '*.h' -o -name '*.cc' \) | sort | awk -v max_file="$max_file" -v max_function="$max_function" \
  -v allowed="$(printf '%s\n' "${ALLOWED[@]}")" '
  BEGIN {
    n = split(allowed, list, "\n")
    for (i = 1; i <= n; ++i) if (list[i] != "") ok[list[i]] = 1
  }
  function report(what) {
    if (what in ok) { used[what] = 1; return }
    print what; bad++
  }
  {
    file = $0; lines = 0; open_line = 0; indent = ""
    while ((getline line < file) > 0) {
      ++lines
      if (open_line == 0) {
        # A definition whose body opens at the end of a line indented 0 or 2
        # (a namespace-level or class-member function), not a class or namespace.
        if (match(line, /^(  )?[A-Za-z~].*\)[^;]*\{$/) && line !~ /^(  )?(namespace|class|struct|enum|union|extern)\b/ &&
            line !~ /=[^=]*\{$/) {
          open_line = lines; indent = substr(line, 1, match(line, /[^ ]/) - 1); name = line
        }
      } else if (line == indent "}" || line == indent "};") {
        length_ = lines - open_line + 1
        if (length_ > max_function) {
          what = file ":" open_line
          if (what in ok || file in ok) { used[what in ok ? what : file] = 1 }
          else { printf "%s:%d: a function of %d lines (at most %d): %s\n", file, open_line, length_, max_function, name; bad++ }
        }
        open_line = 0
      }
    }
    close(file)
    if (lines > max_file) {
      if (file in ok) used[file] = 1
      else { printf "%s: %d lines (at most %d)\n", file, lines, max_file; bad++ }
    }
  }
  END {
    for (entry in ok) if (!(entry in used)) { printf "check-sizes: \"%s\" is within the limits now: remove it from ALLOWED\n", entry; bad++ }
    if (bad > 0) { printf "check-sizes: %d finding(s)\n", bad; exit 1 }
    printf "check-sizes: every file in src within %d lines, every function within %d (%d allowed offender(s) listed)\n", max_file, max_function, length(ok)
  }'
