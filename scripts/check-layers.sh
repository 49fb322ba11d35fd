#!/usr/bin/env bash
# Fails when a room of src/ includes a higher layer (docs/architecture.md,
# "Layers"). Tests (*_test*) may include anything. The public headers
# (include/ros2) are one layer every room above src/common may include;
# ros2/types.h (Status, Result, ids) every room. The test support library
# (src/testing, and */testing/ of a component) sits above every room, like
# tests: it is not checked, and no room may include it. So are the FUSE
# conformance cases (src/fuse/fuse_conformance*), test code the test links.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A rank=(
  [common]=0
  [offload]=1 [placement]=1 [object]=1 [transport]=1 [control]=1 [metrics]=1
  [vos]=2 [client]=2 [libros2]=2
  [engine]=3 [dfs]=3
  [fuse]=4 [fio]=4
  [agent]=5
  [testing]=9
)
bad=0
while IFS= read -r file; do
  room=${file#src/}
  room=${room%%/*}
  [[ -n ${rank[$room]+x} ]] || { echo "check-layers: $file: room '$room' has no layer"; bad=1; continue; }
  while IFS= read -r inc; do
    target=${inc%%/*}
    [[ $target == "$room" ]] && continue
    if [[ $target == ros2 ]]; then
      [[ $inc == ros2/types.h || ${rank[$room]} -ge 1 ]] && continue
      echo "check-layers: $file includes \"$inc\" (src/$room is below the public API)"
      bad=1
      continue
    fi
    [[ -n ${rank[$target]+x} ]] || continue  # generated or third-party paths
    if (( rank[$target] >= rank[$room] )); then
      echo "check-layers: $file includes \"$inc\": src/$target is not below src/$room"
      bad=1
    fi
  done < <(grep -oE '^#include "[a-z_0-9]+/[^"]+"' "$file" | sed 's/^#include "//; s/"$//')
done < <(find src/ \( -name '*.h' -o -name '*.cc' -o -name '*.c' \) ! -name '*_test*' ! -name '*test_support*' \
           ! -name '*test_peer*' ! -name 'fuse_conformance*' ! -path '*/testing/*' | sort)
if (( bad )); then
  echo "check-layers: a lower layer includes a higher one (docs/architecture.md, \"Layers\")"
  exit 1
fi
echo "check-layers: ok"
