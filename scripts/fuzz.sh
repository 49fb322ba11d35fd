#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 (-DROS2_FUZZ=ON) in build-fuzz and
# runs each for a bounded time, starting from its committed corpus
# fuzz/corpus/<target>/. Fails on the first crash, leak or timeout a fuzzer finds.
# Every directory under fuzz/corpus/ names one fuzz target.
#   FUZZ_SECONDS=60  seconds per target
#   BUILD_DIR=build-fuzz
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}

targets=()
for dir in fuzz/corpus/*/; do
  targets+=("$(basename "$dir")")
done
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz.sh: no corpora under fuzz/corpus/" >&2
  exit 1
fi

cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROS2_FUZZ=ON -DROS2_BUILD_BENCH=OFF >/dev/null
# (Tests stay configured, as in every other build, though only the fuzz
# targets are built: some components declare test properties unconditionally.)
ninja -C "$BUILD_DIR" -j2 "${targets[@]}"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for t in "${targets[@]}"; do
  bin=$(find "$BUILD_DIR" -type f -name "$t" -perm -u+x | head -n1)
  if [ -z "$bin" ]; then
    echo "fuzz.sh: target $t was not built" >&2
    exit 1
  fi
  # New inputs go to a scratch directory; the committed corpus is only read.
  mkdir -p "$scratch/$t"
  echo "=== fuzzing $t for ${FUZZ_SECONDS}s"
  (cd "$scratch" && "$OLDPWD/$bin" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
     -print_final_stats=1 -artifact_prefix="$scratch/$t-" "$scratch/$t" "$OLDPWD/fuzz/corpus/$t") || {
    echo "fuzz.sh: $t failed; reproducer(s):" >&2
    ls -l "$scratch"/"$t"-* >&2 || true
    for f in "$scratch"/"$t"-*; do [ -f "$f" ] && od -A d -t x1 "$f" | head -20 >&2; done
    exit 1
  }
done
echo "fuzz.sh: ${#targets[@]} target(s) ran ${FUZZ_SECONDS}s each without a crash"
