#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 (-DROS2_FUZZ=ON) in build-fuzz and
# runs each for a bounded time, starting from its committed corpus
# fuzz/corpus/<target>/, one target per CPU at a time. Fails when a fuzzer finds
# a crash, leak or timeout.
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
bins=()
for t in "${targets[@]}"; do
  bin=$(find "$BUILD_DIR" -type f -name "$t" -perm -u+x | head -n1)
  if [ -z "$bin" ]; then
    echo "fuzz.sh: target $t was not built" >&2
    exit 1
  fi
  bins+=("$PWD/$bin")
done

# One fuzzer per CPU at a time: each is single-threaded, so the wall time is
# the per-target budget times ceil(targets / CPUs). New inputs go to a scratch
# directory; the committed corpus is only read. Each fuzzer's output goes to its
# own log, printed when it ends.
fuzz_one() {
  local t=$1 bin=$2
  mkdir -p "$scratch/$t"
  (cd "$scratch" && "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
     -print_final_stats=1 -artifact_prefix="$scratch/$t-" "$scratch/$t" "$OLDPWD/fuzz/corpus/$t") \
     >"$scratch/$t.log" 2>&1
}
report() {
  local t=$1 rc=$2
  echo "=== $t: ${FUZZ_SECONDS}s budget, exit status $rc"
  tail -n 25 "$scratch/$t.log"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz.sh: $t failed; reproducer(s):" >&2
    ls -l "$scratch"/"$t"-* >&2 || true
    for f in "$scratch"/"$t"-*; do [ -f "$f" ] && od -A d -t x1 "$f" | head -20 >&2; done
    return 1
  fi
}
slots=$(nproc)
failed=0
for ((i = 0; i < ${#targets[@]}; i += slots)); do
  pids=()
  for ((j = i; j < i + slots && j < ${#targets[@]}; j++)); do
    fuzz_one "${targets[$j]}" "${bins[$j]}" &
    pids+=($!)
  done
  for ((k = 0; k < ${#pids[@]}; k++)); do
    rc=0
    wait "${pids[$k]}" || rc=$?
    report "${targets[$((i + k))]}" "$rc" || failed=1
  done
  [ "$failed" -eq 0 ] || exit 1
done
echo "fuzz.sh: ${#targets[@]} target(s) ran ${FUZZ_SECONDS}s each without a crash"
