#!/bin/sh
# Installs the Debian packages memlens needs to build, test and run its demo; no-op when present.
set -e
PKGS="clang-14 llvm-14-dev libclang-rt-14-dev libomp-14-dev libcmocka-dev libzstd-dev
libcapstone-dev libzydis-dev llvm-14 hyperfine valgrind binutils make gcc python3 cmake chromium
qemu-user libc6-dev-arm64-cross libgcc-12-dev-arm64-cross libstdc++-12-dev-arm64-cross
binutils-aarch64-linux-gnu openmpi-bin libopenmpi-dev googletest"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "memlens: installing$missing" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
