#!/usr/bin/env bash
# Proves that libros2 is installable and usable from outside the tree:
#   1. `cmake --install BUILD_DIR` into a temporary prefix;
#   2. checks the installed tree: only include/ros2 headers, none including an
#      internal (src/) header or fmt; libros2.so with SONAME libros2.so.0; no
#      RocksDB in ldd of libros2.so (nor of the fio engine when it was built);
#   3. copies examples/hello out of the source tree and builds it against the
#      prefix only: hello through find_package(ros2), hello-pc and hello_c (C)
#      through pkg-config (`-lros2`);
#   4. with ROS2CTL and ENGINE given: starts a single-node cluster in a
#      temporary directory, and runs hello (object + DFS file) and hello_c.
# Usage: scripts/example-check.sh BUILD_DIR [ROS2CTL ENGINE]
# (ctest runs it as install_example_check, label "install").
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: example-check.sh BUILD_DIR [ROS2CTL ENGINE]}" && pwd)
ctl=${2:-}
engine=${3:-}
work=$(mktemp -d /tmp/ros2-example-check.XXXXXX)
chmod 711 "$work"   # the engine, started as root, runs as the ros2 user (docs/security.md)
cluster_up=0
cleanup() {
  if [ "$cluster_up" = 1 ]; then
    "$ctl" --data-dir "$work/cluster" cluster down --timeout 30 --force >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "example-check: FAIL: $*" >&2; exit 1; }

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null

# --- the installed tree ---
lib=$(find "$prefix" -name 'libros2.so.*.*' -type f | head -1)
[ -n "$lib" ] || fail "no libros2.so.X.Y.Z under $prefix"
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libros2.so.0" ] || fail "SONAME of $lib is '$soname', expected libros2.so.0"
if ldd "$lib" | grep -i rocksdb; then fail "libros2.so links RocksDB"; fi
if nm -D --defined-only "$lib" | grep -qi rocksdb; then fail "libros2.so exports RocksDB symbols"; fi
if [ -f "$build/src/fio/libros2_fio.so" ] && ldd "$build/src/fio/libros2_fio.so" | grep -i rocksdb; then
  fail "libros2_fio.so links RocksDB"
fi
headers=$(cd "$prefix/include" && find . -type f | sort | tr '\n' ' ')
[ "$headers" = "./ros2/client.h ./ros2/dfs.h ./ros2/ros2.h ./ros2/types.h " ] || fail "installed headers: $headers"
if grep -n '#include' "$prefix"/include/ros2/*.h | grep -v -E '#include <[a-z_/]+(\.h)?>|#include "ros2/[a-z_]+\.h"'; then
  fail "an installed header includes something outside the standard library and ros2/"
fi
if grep -n -E '#include <fmt/' "$prefix"/include/ros2/*.h; then fail "an installed header includes fmt"; fi
[ -f "$prefix/lib/cmake/ros2/ros2Config.cmake" ] || [ -n "$(find "$prefix" -name ros2Config.cmake)" ] ||
  fail "no ros2Config.cmake"
pc_dir=$(dirname "$(find "$prefix" -name ros2.pc | head -1)")
[ -f "$pc_dir/ros2.pc" ] || fail "no ros2.pc"

# --- the example, out of the source tree, against the prefix only ---
cp -r "$src/examples/hello" "$work/hello"
cmake -S "$work/hello" -B "$work/hello-build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" >/dev/null
cmake --build "$work/hello-build" >/dev/null
export PKG_CONFIG_PATH=$pc_dir
libdir=$(pkg-config --variable=libdir ros2)
# shellcheck disable=SC2046
c++ -std=c++20 -Wall -Wextra -Werror -o "$work/hello-pc" "$work/hello/hello.cc" $(pkg-config --cflags --libs ros2) \
  -Wl,-rpath,"$libdir"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -o "$work/hello_c" "$work/hello/hello_c.c" $(pkg-config --cflags --libs ros2) \
  -Wl,-rpath,"$libdir"
for bin in "$work/hello-build/hello" "$work/hello-pc" "$work/hello_c"; do
  loaded=$(ldd "$bin" | awk '$1 == "libros2.so.0" {print $3}')
  [ -n "$loaded" ] && [ "$(readlink -f "$loaded")" = "$(readlink -f "$lib")" ] ||
    fail "$bin does not load the installed libros2.so.0 (ldd: '$loaded')"
done
echo "example-check: installed into $prefix and built examples/hello against it"

# --- run against a real cluster ---
if [ -z "$ctl" ] || [ -z "$engine" ]; then
  echo "example-check: no ros2ctl/engine given; not running the example"
  exit 0
fi
"$ctl" --data-dir "$work/cluster" cluster up --targets 2 --class ram --transport tcp --shard-size 64MiB \
  --engine "$engine" --timeout 60 >/dev/null
cluster_up=1
"$ctl" --data-dir "$work/cluster" pool create p --size 128MiB >/dev/null
"$ctl" --data-dir "$work/cluster" cont create p c >/dev/null
json_field() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }
control=$(json_field "$work/cluster/cluster.json" control)
secret=$(json_field "$work/cluster/cluster.json" admin_secret_file)
"$work/hello-build/hello" --control "$control" --secret-file "$secret" --transport tcp --pool p --container c
"$work/hello_c" "$control" "$secret" p c
echo "example-check: OK"
