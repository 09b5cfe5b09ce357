#!/usr/bin/env bash
# Sets up a fresh Debian machine for axonn and builds it: installs the Debian
# packages the project needs (only the missing ones; apt-get update runs once, only
# when something is missing), then configures and builds into build/.
#
#   bash tools/setup.sh            # packages + build
#   AXONN_BUILD_DIR=out bash tools/setup.sh
#   AXONN_UNITY_BUILD=OFF bash tools/setup.sh   # one object file per source
#   AXONN_BUILD_BENCHES=OFF bash tools/setup.sh # without the benchmarks no test runs
#                                               # (the test command's choice)
#
# Idempotent: a second run installs nothing and rebuilds only what changed.
# A unity build (CMake's CMAKE_UNITY_BUILD: up to 8 sources of a target compiled as
# one) is the default: on a 2-core machine a fresh build takes 7.4 minutes
# instead of 10.6 (docs/performance.md). While editing, AXONN_UNITY_BUILD=OFF rebuilds
# one file per change instead of its batch.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake
  libtorch-dev libopenblas0-pthread     # LibTorch 1.13 (CPU) on OpenBLAS, never reference BLAS
  libopenmpi-dev openmpi-bin            # Open MPI 4.1: the runtime's communicator and launcher
  nlohmann-json3-dev libeigen3-dev libfmt-dev libgtest-dev libcli11-dev
  iproute2                              # ip netns / tc for the emulated cluster
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

BUILD_DIR="${AXONN_BUILD_DIR:-build}"
JOBS="$(nproc)"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD="${AXONN_UNITY_BUILD:-ON}" \
  -DAXONN_BUILD_BENCHES="${AXONN_BUILD_BENCHES:-ON}" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
