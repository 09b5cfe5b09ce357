#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (GoogleTest and scripts through CTest),
# then proves the planner stands alone: a second build configured without LibTorch and
# without MPI gives a working axplan and passes the planner tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# Without the benchmarks that no test runs (about 2 minutes on 2 cores; `cmake --build
# build --target benches` builds them).
AXONN_BUILD_BENCHES="${AXONN_BUILD_BENCHES:-OFF}" bash tools/setup.sh
BUILD_DIR="${AXONN_BUILD_DIR:-build}"
# Without the `full` label: the option tests' whole 8-rank matrices run outside CI
# (`ctest -L full`, tests/CMakeLists.txt).
# On a failure, the GoogleTest failures again at the end of the output (every rank's,
# from CTest's log), where a CI log cut to its head and tail still shows them.
status=0
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 600 -j "$(nproc)" -LE full) || status=$?
if [ "$status" -ne 0 ]; then
  echo "== the failures again (from $BUILD_DIR/Testing/Temporary/LastTest.log) =="
  grep -a -A6 -E '^\[rank [0-9]+\] .*: failure$|: Failure$' "$BUILD_DIR/Testing/Temporary/LastTest.log" | tail -80 || true
  exit "$status"
fi

echo "== planner-only build (AXONN_WITH_TORCH=OFF, AXONN_WITH_MPI=OFF) =="
PLANNER_DIR="${BUILD_DIR}-planner-only"
# The libraries one object file per source here (the main build is a unity build,
# tools/setup.sh): a missing #include that a unity batch hides fails this build. The
# planner tests in unity batches (38 s less on 2 cores).
cmake -S . -B "$PLANNER_DIR" -DCMAKE_BUILD_TYPE=Release -DAXONN_WITH_TORCH=OFF -DAXONN_WITH_MPI=OFF \
  -DCMAKE_UNITY_BUILD=OFF -DAXONN_UNITY_PLANNER_TESTS=ON >/dev/null
cmake --build "$PLANNER_DIR" -j "$(nproc)"
(cd "$PLANNER_DIR" && ctest --output-on-failure --timeout 600 -j "$(nproc)")
