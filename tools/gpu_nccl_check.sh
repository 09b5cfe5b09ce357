#!/usr/bin/env bash
# The GPU check of the NCCL backend: builds runtime_nccl_tests (tests/runtime/test_nccl_mpi.cpp)
# against the CUDA LibTorch of a GPU machine's Python and runs it under mpirun on 1 rank
# (every collective against the MPI backend, on the GPU) and on 2 ranks (more ranks than
# GPUs on one host: every rank must refuse with a message). Not part of CI, which has no
# GPU; docs/runtime.md gives what it printed.
#
# Usage: tools/gpu_nccl_check.sh [--suite] [OUT_DIR]   (OUT_DIR: $OUT, else ./gpu-check)
#   --suite: also build runtime_mpi_tests against that LibTorch and run it on 1, 2 and 4
#            ranks (the CPU runtime on another LibTorch version).
# Needs: nvidia-smi, python3 with torch, Open MPI, nlohmann-json, fmt, CLI11, Eigen,
# GoogleTest and NCCL's header and library (as on the device machines of this workplace).
set -uo pipefail
cd "$(dirname "$0")/.."
suite=0
if [[ ${1:-} == --suite ]]; then suite=1; shift; fi
out=${1:-${OUT:-gpu-check}}
mkdir -p "$out"
build=build-gpu
jobs=$(nproc)

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  mpirun --version | head -1
  echo "cpus $(nproc)"
  grep -h "define NCCL_\(MAJOR\|MINOR\|PATCH\) " /usr/include/nccl.h /usr/local/cuda/include/nccl.h 2>/dev/null
} 2>&1 | tee "$out/env.txt"

source tools/torch_wheel_configure.sh
torch_wheel_configure "$build" "$out" | tee -a "$out/env.txt"
(( PIPESTATUS[0] == 0 )) || exit 1
grep -E "axonn:|Torch|CUDA" "$out/cmake.log" | head -20

start=$(date +%s)
targets=(runtime_nccl_tests)
(( suite )) && targets+=(runtime_mpi_tests)
if ! make -C "$build" -k -j"$jobs" "${targets[@]}" > "$out/build.log" 2>&1; then
  grep -E "error|Error" "$out/build.log" | head -60
  exit 1
fi
echo "built ${targets[*]} in $(( $(date +%s) - start )) s"

mpirun=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp)
status=0
NCCL_DEBUG=VERSION timeout 300 "${mpirun[@]}" -np 1 "$build/tests/runtime_nccl_tests" 2>&1 | tee "$out/np1.log" || status=1
timeout 120 "${mpirun[@]}" -np 2 "$build/tests/runtime_nccl_tests" 2>&1 | tee "$out/np2.log" || status=1
if (( suite )); then
  for np in 1 2 4; do
    timeout 180 "${mpirun[@]}" -np $np "$build/tests/runtime_mpi_tests" > "$out/suite-np$np.log" 2>&1 || status=1
    grep -E "PASSED|FAILED|tests ran" "$out/suite-np$np.log" | sed "s/^/np$np: /"
  done
fi
echo "gpu_nccl_check: exit $status"
exit $status
