#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (GoogleTest through CTest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
BUILD_DIR="${AXONN_BUILD_DIR:-build}"
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 600 -j "$(nproc)"
