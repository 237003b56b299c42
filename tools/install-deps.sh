#!/usr/bin/env bash
# Installs walfs's build, test and benchmark dependencies from Debian 12's packages.
# Run as root (apt-get). Safe to run again: apt skips what is already installed.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PACKAGES=(
  build-essential cmake pkg-config          # toolchain
  libpmem-dev libfuse3-dev fuse3            # PMDK's libpmem, libfuse3 + fusermount3
  libabsl-dev libgtest-dev googletest       # Abseil, GoogleTest
  libbenchmark-dev                          # Google Benchmark (core microbenchmarks)
  postgresql-15 postgresql-contrib          # a real PostgreSQL 15 for integration tests
  clang libclang-rt-14-dev                  # libFuzzer target
  procps psmisc util-linux                  # ps/pkill, fuser, mount/findmnt for tests
  python3 file groff-base systemd           # test helpers, man page and unit checks
  nlohmann-json3-dev                        # JSON reader of walfsctl (header-only)
  dpkg-dev lintian                          # dpkg-buildflags, dpkg-shlibdeps; package checks
  debootstrap strace                        # PostgreSQL 17/18 chroots (tools/pg-chroot);
                                            # the direct library's coverage test
)
case "${1:-}" in
  -h|--help)
    echo "Usage: tools/install-deps.sh"
    echo "Installs with apt-get (as root) the Debian 12 packages walfs needs to build, test"
    echo "and benchmark:"
    printf '  %s\n' "${PACKAGES[@]}"
    exit 0
    ;;
  "") ;;
  *)
    echo "install-deps.sh: unknown argument '$1'" >&2
    echo "Try 'install-deps.sh --help' for more information." >&2
    exit 1
    ;;
esac
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: run as root (it calls apt-get)" >&2
  exit 1
fi
apt-get update
apt-get install -y --no-install-recommends "${PACKAGES[@]}"
