#!/usr/bin/env bash
# The fuzz test (tests/planner/test_fuzz.cpp: 1080 mutated models, clusters and plans)
# and the rest of the planner tests under AddressSanitizer and UBSan, in a planner-only
# build (no LibTorch, no MPI). Not in CI (the sanitized build takes about 8 minutes on
# 2 cores); any sanitizer report fails it.
#
#   bash tools/fuzz_sanitized.sh [BUILD_DIR=build-asan]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-asan}
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAXONN_WITH_TORCH=OFF -DAXONN_WITH_MPI=OFF \
  -DAXONN_SANITIZE=ON >/dev/null
cmake --build "$B" -j "$(nproc)" --target planner_tests
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1
"$B/tests/planner_tests" 2>&1 | tee "$B/planner_tests.log"
if grep -qE "runtime error|ERROR: AddressSanitizer|ERROR: LeakSanitizer" "$B/planner_tests.log"; then
  echo "fuzz_sanitized: sanitizer report"; exit 1
fi
echo "fuzz_sanitized: no sanitizer report"
