#!/usr/bin/env bash
# Installs Debian's libuct and libucp (UCX's transport and protocol layers)
# rebuilt with the patches in third_party/ucx-patches, so a peer cannot kill a
# ROS2 engine with what it sends over UCX (docs/security.md, "UCX tcp
# segments" and "Remote memory access into the engine") or by exiting while
# the engine connects to it (docs/transport.md, "Failure handling").
#
# Why a rebuilt library: UCX 1.13's tcp receiver checks the length in a
# peer's active-message header only with an assertion
# (src/uct/tcp/tcp_ep.c, uct_tcp_ep_progress_am_rx: `hdr->length <=
# rx_seg_size - sizeof(*hdr)`). A peer whose UCX_TCP_TX_SEG_SIZE is larger than
# the receiver's UCX_TCP_RX_SEG_SIZE sends one large message and the receiver
# aborts; built without assertions it would receive past its buffer instead.
# No UCX setting of the receiver bounds what a peer sends, so the check itself
# is fixed: the patched receiver logs an error naming the sizes and closes that
# one connection. The second patch adds UCX_RMA_SW_TARGET to libucp: with n
# (the engine sets it) the software emulation of put and get no longer writes
# or reads whatever address a peer names. The third makes a tcp interface
# with put disabled (UCX_TCP_PUT_ENABLE=n, which the engine sets) close a
# connection that sends a transport-level put request with data (UCX 1.13
# copies it to the address the request names even when put is disabled), and
# any endpoint close one that acknowledges a put it did not send (an assertion
# in UCX 1.13). The fourth makes uct_ep_create fail when the peer of its new
# tcp connection exits before the connection request is sent and refuses the
# reconnection: UCX 1.13 returns that endpoint and then destroys it itself
# from the next progress call (an assertion in uct_tcp_ep_destroy_progress).
#
# Steps: `apt-get source ucx` at the installed libucx0 version (deb-src from
# scripts/ensure-deb-src.sh), apply the patches, configure with the options
# of Debian's own build (debian/rules and dh_auto_configure), build only
# libucm, libucs, libuct and libucp (the tcp, shared-memory and self transports
# live in libuct; the loadable modules are untouched), check that each rebuilt
# library exports exactly the symbols of Debian's, then replace
# /usr/lib/<triplet>/libuct.so.0.0.0 and libucp.so.0.0.0 through dpkg-divert:
# Debian's files move to /usr/lib/<triplet>/ros2-ucx-debian/ (a directory the
# dynamic loader does not search; in the library directory itself ldconfig
# would point the soname links at them) and dpkg puts later versions there.
#
# Idempotent: the state file records the libucx0 version, the patches' checksum
# and the installed libraries' checksums; when all match, nothing is done.
# After an upgrade of libucx0 the next run rebuilds against the new version.
# Run as root (or with sudo available).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

PATCH_DIR=$PWD/third_party/ucx-patches
TRIPLET=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
LIBDIR=/usr/lib/$TRIPLET
DIVERT_DIR=$LIBDIR/ros2-ucx-debian
LIBS="libuct libucp"
STATE=/var/lib/ros2/ucx-patch.state
# "name=checksum ..." of the installed libraries, and whether each soname link
# resolves to the installed file.
installed_state() {
  local out="" l
  for l in $LIBS; do
    [ -f "$LIBDIR/$l.so.0.0.0" ] || return 1
    [ "$(readlink -f "$LIBDIR/$l.so.0")" = "$LIBDIR/$l.so.0.0.0" ] || return 1
    out="$out $l=$(sha256sum "$LIBDIR/$l.so.0.0.0" | cut -d' ' -f1)"
  done
  echo "${out# }"
}

version=$(dpkg-query -W -f='${Version}' libucx0 2>/dev/null || true)
[ -n "$version" ] || { echo "install-ucx-patch: libucx0 is not installed (run scripts/install-deps.sh)" >&2; exit 1; }
patches_sum=$(cat "$PATCH_DIR"/*.patch | sha256sum | cut -d' ' -f1)
want="libucx0=$version patches=$patches_sum"
if [ -f "$STATE" ] && now=$(installed_state) && [ "$(cat "$STATE")" = "$want $now" ]; then
  echo "install-ucx-patch: patched $LIBS present (libucx0 $version)"
  exit 0
fi
for p in dpkg-dev autoconf automake libtool libibverbs-dev librdmacm-dev libnuma-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    { echo "install-ucx-patch: package $p is missing (run scripts/install-deps.sh)" >&2; exit 1; }
done

# deb-src and a fresh index for `apt-get source`.
bash scripts/ensure-deb-src.sh

echo "install-ucx-patch: building $LIBS $version with $(ls "$PATCH_DIR" | tr '\n' ' ')"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get source -q "ucx=$version" >"$work/source.log" 2>&1) || {
  tail -20 "$work/source.log" >&2
  echo "install-ucx-patch: apt-get source ucx=$version failed" >&2
  exit 1
}
src=$(find "$work" -maxdepth 1 -mindepth 1 -type d -name 'ucx-*' | head -n 1)
[ -n "$src" ] || { echo "install-ucx-patch: no ucx-* directory after apt-get source" >&2; exit 1; }
for p in "$PATCH_DIR"/*.patch; do
  patch -d "$src" -p1 --forward --quiet <"$p" >"$work/patch.log" 2>&1 || {
    cat "$work/patch.log" >&2
    echo "install-ucx-patch: $(basename "$p") does not apply to ucx $version" >&2
    exit 1
  }
done
log=$work/build.log
(
  cd "$src"
  ./autogen.sh
  # Debian's compiler flags, without debug information (the packaged library
  # carries none either).
  eval "$(dpkg-buildflags --export=sh)"
  CFLAGS=${CFLAGS//-g /}
  export CFLAGS
  # dh_auto_configure's standard options, then those of debian/rules.
  ./configure --build="$(dpkg-architecture -qDEB_BUILD_GNU_TYPE)" --prefix=/usr --includedir='${prefix}/include' \
    --mandir='${prefix}/share/man' --infodir='${prefix}/share/info' --sysconfdir=/etc --localstatedir=/var \
    --disable-option-checking --disable-silent-rules --libdir="\${prefix}/lib/$TRIPLET" --runstatedir=/run \
    --disable-maintainer-mode --disable-dependency-tracking \
    --enable-mt --with-verbs --disable-backtrace-detail --disable-logging --enable-devel-headers \
    --enable-examples --enable-cma
  make -j"$(nproc)" -C src/ucm libucm.la
  make -j"$(nproc)" -C src/ucs libucs.la
  make -j"$(nproc)" -C src/uct libuct.la
  make -j"$(nproc)" -C src/ucp libucp.la
) >"$log" 2>&1 || {
  tail -30 "$log" >&2
  echo "install-ucx-patch: build failed (full log was $log)" >&2
  exit 1
}
# Each rebuilt library must export what Debian's exports (same source, same
# options): anything else means it is not a drop-in replacement.
for l in $LIBS; do
  built=$src/src/${l#lib}/.libs/$l.so.0.0.0
  [ -f "$built" ] || { echo "install-ucx-patch: $built was not built" >&2; exit 1; }
  orig=$LIBDIR/$l.so.0.0.0
  [ -f "$DIVERT_DIR/$l.so.0.0.0" ] && orig=$DIVERT_DIR/$l.so.0.0.0
  nm -D --defined-only "$orig" | awk '{print $NF}' | sort >"$work/orig.syms"
  nm -D --defined-only "$built" | awk '{print $NF}' | sort >"$work/built.syms"
  if ! cmp -s "$work/orig.syms" "$work/built.syms"; then
    diff "$work/orig.syms" "$work/built.syms" | head -20 >&2
    echo "install-ucx-patch: the rebuilt $l exports other symbols than Debian's; not installing" >&2
    exit 1
  fi
  $SUDO install -m 0644 "$built" "$work/$l.so.0.0.0"
  $SUDO strip --strip-unneeded "$work/$l.so.0.0.0"
done
$SUDO mkdir -p "$DIVERT_DIR"
for l in $LIBS; do
  lib=$LIBDIR/$l.so.0.0.0
  $SUDO install -m 0644 "$work/$l.so.0.0.0" "$lib.ros2-new"
  if ! dpkg-divert --list "$lib" | grep -q "$DIVERT_DIR/"; then
    $SUDO dpkg-divert --local --rename --divert "$DIVERT_DIR/$l.so.0.0.0" --add "$lib" >/dev/null
  fi
  $SUDO mv -f "$lib.ros2-new" "$lib"
done
$SUDO ldconfig
now=$(installed_state) || { echo "install-ucx-patch: a soname link does not resolve to the installed library after ldconfig" >&2; exit 1; }
$SUDO mkdir -p "$(dirname "$STATE")"
echo "$want $now" | $SUDO tee "$STATE" >/dev/null
echo "install-ucx-patch: installed patched $LIBS in $LIBDIR (Debian's kept in $DIVERT_DIR)"
