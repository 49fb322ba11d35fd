#!/usr/bin/env bash
# Fails when a lower layer includes a higher one, by the layer diagram of
# docs/architecture.md ("Layers"):
#
#   client side  src/fuse, src/fio (14) > src/agent (13) > src/dfs (12)
#                > src/client, src/libros2 (11)
#   engine side  src/engine (8) > src/vos (7)
#   shared       src/placement (6) > src/object (5) > src/transport (4)
#                > src/control (3) > src/metrics (2) > src/common (1)
#
# A file may include its own layer and the layers below it, never across the
# two sides (the client side does not include src/vos or src/engine; the
# engine side does not include the client side). Public headers count by what
# they are: ros2/client.h and ros2/ros2.h are the client's, ros2/dfs.h the
# DFS's, the rest (ros2/types.h, ...) common. Tests (*_test.cc, */testing/*),
# tools/, bench/ and tests/ sit above everything and are not checked.
#
# ALLOWED lists known crossings still being removed ("file -> include"); the
# list is meant to be empty. Usage: scripts/check-layers.sh [source root]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

ALLOWED=(
  # The host side of the offload rings moves into the client (offload as a backend).
  "src/client/client.cc -> agent/host_session.h"
  "src/client/client_internal.h -> agent/host_session.h"
  "src/client/event_queue.cc -> agent/host_session.h"
  "src/dfs/offload_mount.h -> agent/host_session.h"
)

rank() {  # the layer of a component (src/<component> or an include's first path part)
  case "$1" in
    common) echo 1 ;; metrics) echo 2 ;; control | proto) echo 3 ;; transport) echo 4 ;;
    object) echo 5 ;; placement) echo 6 ;; vos) echo 7 ;; engine) echo 8 ;;
    client | libros2) echo 11 ;; dfs) echo 12 ;; agent) echo 13 ;; fuse | fio) echo 14 ;;
    *) echo 0 ;;
  esac
}

public_rank() {  # the layer of a public header ros2/<name>
  case "$1" in
    client.h | ros2.h) echo 11 ;; dfs.h) echo 12 ;; *) echo 1 ;;
  esac
}

side() {  # engine (7, 8), client (11 and up) or shared
  if (($1 >= 11)); then echo client; elif (($1 >= 7)); then echo engine; else echo shared; fi
}

allowed() {
  local entry
  for entry in "${ALLOWED[@]}"; do [[ "$entry" == "$1" ]] && return 0; done
  return 1
}

violations=0
declare -A used=()
while IFS= read -r file; do
  component=${file#src/}
  component=${component%%/*}
  from=$(rank "$component")
  ((from == 0)) && continue
  while IFS= read -r inc; do
    first=${inc%%/*}
    if [[ "$first" == ros2 ]]; then
      to=$(public_rank "${inc#ros2/}")
    else
      to=$(rank "$first")
    fi
    ((to == 0)) && continue
    from_side=$(side "$from")
    to_side=$(side "$to")
    bad=""
    if ((to > from)); then
      bad="a lower layer ($component) includes a higher one"
    elif [[ "$from_side" != "$to_side" && "$to_side" != shared ]]; then
      bad="the $from_side side includes the $to_side side"
    fi
    [[ -z "$bad" ]] && continue
    if allowed "$file -> $inc"; then
      used["$file -> $inc"]=1
      continue
    fi
    echo "$file: #include \"$inc\": $bad (docs/architecture.md, \"Layers\")"
    violations=$((violations + 1))
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find src -type f \( -name '*.h' -o -name '*.cc' \) ! -name '*_test.cc' ! -path '*/testing/*' | sort)

for entry in "${ALLOWED[@]}"; do
  if [[ -z "${used[$entry]:-}" ]]; then
    echo "check-layers: the allowed crossing '$entry' no longer occurs: remove it from ALLOWED"
    violations=$((violations + 1))
  fi
done

if ((violations > 0)); then
  echo "check-layers: $violations include(s) against the layer diagram"
  exit 1
fi
echo "check-layers: every include in src follows the layer diagram (${#ALLOWED[@]} allowed crossing(s) listed)"
