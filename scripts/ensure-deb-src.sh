#!/usr/bin/env bash
# Makes `apt-get source` work: adds a deb-src entry derived from
# /etc/apt/sources.list.d/debian.sources when no deb-src entry exists, then
# refreshes the package index (retried, as install-deps.sh does). Used by
# scripts/fetch-fio-source.sh and scripts/install-ucx-patch.sh. Run as root
# (or with sudo available).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
SRC_LIST=/etc/apt/sources.list.d/ros2-deb-src.sources
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ /etc/apt/sources.list 2>/dev/null; then
  base=/etc/apt/sources.list.d/debian.sources
  [ -f "$base" ] || { echo "ensure-deb-src: $base not found; cannot derive a deb-src entry" >&2; exit 1; }
  sed 's/^Types: deb$/Types: deb-src/' "$base" | $SUDO tee "$SRC_LIST" >/dev/null
fi
for attempt in 1 2 3; do
  if $SUDO apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null; then
    exit 0
  fi
  [ "$attempt" -lt 3 ] || { echo "ensure-deb-src: apt-get update failed" >&2; exit 1; }
  echo "ensure-deb-src: apt-get update failed (attempt $attempt); retrying" >&2
  sleep 10
done
