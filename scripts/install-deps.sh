#!/usr/bin/env bash
# Installs every Debian bookworm package ROS2 needs to build, test and benchmark,
# then UCX's libuct and libucp rebuilt with the fixes in third_party/ucx-patches
# (scripts/install-ucx-patch.sh: without them a peer with larger UCX tcp
# segments, or a put to any address, kills the engine). Idempotent: packages already present are skipped
# by apt, and an installed patched libuct is detected by checksum. Run as root.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config git clang-format
  # reading cluster.json in the README's example
  jq
  clang-14 libclang-rt-14-dev lld-14
  # the linker the build uses when present (ld.lld; lld-14 alone has only ld.lld-14)
  lld
  # data plane; autoconf, automake and libtool rebuild UCX's libuct and libucp from
  # Debian's source with third_party/ucx-patches (scripts/install-ucx-patch.sh)
  libucx-dev ucx-utils autoconf automake libtool
  # the second data-plane provider (transport.provider: ofi): libfabric, and
  # fi_info / fi_pingpong, which the tests and ros2-bench transport run
  libfabric-dev libfabric-bin
  # control plane
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  # cluster state store (docs/cluster.md): etcd and etcdctl, which the cluster
  # tests start, and etcd's .proto files with their gogo imports, from which the
  # build generates the C++ etcd v3 stubs
  etcd-server etcd-client golang-etcd-server-dev golang-github-gogo-protobuf-dev golang-github-gogo-googleapis-dev
  # the several-hosts harness (`ros2ctl cluster up --hosts`): ip for namespaces, veth and the bridge
  iproute2
  # storage
  librocksdb-dev liburing-dev libisal-dev
  # security
  libssl-dev
  # common
  libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  # POSIX face
  libfuse3-dev fuse3
  # fio external ioengine: the -dev packages Debian's own fio build used (so
  # fio's configure yields the installed binary's config-host.h), and dpkg-dev
  # for `apt-get source fio` (scripts/fetch-fio-source.sh)
  dpkg-dev libaio-dev libnuma-dev librdmacm-dev libibverbs-dev
  # tests and benchmarks (the mount tests run tar, git, dd, cmp, diff, fio,
  # setpriv and umount on the mount)
  libgtest-dev libgmock-dev libbenchmark-dev fio procps util-linux mount tar diffutils
  # Python face (python/, docs/python.md): for Debian's /usr/bin/python3
  pybind11-dev python3-dev python3-pytest python3-numpy python3-fsspec python3-torch
  # `ros2-bench paper`: its figures (bench/paper/paper.py, Debian's /usr/bin/python3)
  python3-matplotlib
  # observability (docs/observability.md): the metrics exposer, and the
  # Prometheus server, promtool and tmux the `metrics` tests run
  prometheus-cpp-dev prometheus tmux
)

export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# The dedicated user and group ros2-engine and ros2-agent switch to when
# started as root (process.user; docs/security.md, "Privileges"): a system
# account without a login shell or a home directory.
if ! getent passwd ros2 >/dev/null; then
  getent group ros2 >/dev/null || $SUDO groupadd --system ros2
  $SUDO useradd --system --gid ros2 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin ros2
  echo "install-deps: created the system user ros2"
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
install_packages() {
  for attempt in 1 2 3 4 5; do
    if $SUDO apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null &&
       $SUDO apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${missing[@]}" >/tmp/ros2-apt.log 2>&1; then
      echo "install-deps: done"
      return 0
    fi
    echo "install-deps: apt-get failed (attempt $attempt), see /tmp/ros2-apt.log; retrying" >&2
    sleep 10
  done
  tail -20 /tmp/ros2-apt.log >&2
  return 1
}
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  install_packages
fi
# After the packages: it rebuilds from libucx0's version, and a package
# upgrade of libucx0 makes it build again.
bash "$(dirname "$0")/install-ucx-patch.sh"
