#!/usr/bin/env bash
# Fetches and configures fio's source from Debian's own source package, so the
# ROS2 fio external ioengine is compiled against exactly the headers (struct
# thread_data, struct io_u, config-host.h) of the fio binary Debian installs.
# Nothing from fio is committed to the repository: the source lands in
# ${FIO_SRC_DIR:-third_party/fio-src} (git-ignored) and this script prints its path.
#
# Steps: add a deb-src twin of the Debian sources, `apt-get update` for its
# index, `apt-get source fio`, then fio's ./configure. The packages this needs
# (dpkg-dev, and the -dev packages Debian's fio build used, so config-host.h
# matches the installed binary: the tail of struct io_u depends on it) are in
# scripts/install-deps.sh, like every other dependency. Idempotent: a
# configured tree is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${FIO_SRC_DIR:-$PWD/third_party/fio-src}
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

if [ -f "$DEST/config-host.h" ] && [ -f "$DEST/fio.h" ]; then
  echo "$DEST"
  exit 0
fi

installed=$(dpkg-query -W -f='${Version}' fio 2>/dev/null || true)
[ -n "$installed" ] || { echo "fetch-fio-source: fio is not installed (run scripts/install-deps.sh)" >&2; exit 1; }
for p in dpkg-dev libaio-dev libnuma-dev librdmacm-dev libibverbs-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    { echo "fetch-fio-source: package $p is missing (run scripts/install-deps.sh)" >&2; exit 1; }
done

# deb-src and a fresh index for `apt-get source`.
bash scripts/ensure-deb-src.sh

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get source -q "fio=$installed" >/dev/null 2>"$work/source.log") || {
  cat "$work/source.log" >&2
  echo "fetch-fio-source: apt-get source fio=$installed failed" >&2
  exit 1
}
srcdir=$(find "$work" -maxdepth 1 -mindepth 1 -type d -name 'fio-*' | head -n 1)
[ -n "$srcdir" ] || { echo "fetch-fio-source: no fio-* directory after apt-get source" >&2; exit 1; }
(cd "$srcdir" && ./configure --disable-native --prefix=/usr >"$work/configure.log" 2>&1) || {
  tail -20 "$work/configure.log" >&2
  echo "fetch-fio-source: fio ./configure failed" >&2
  exit 1
}
rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
mv "$srcdir" "$DEST"
echo "$DEST"
