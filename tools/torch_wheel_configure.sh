# Sourced by the scripts that build on a lent GPU machine (tools/gpu_nccl_check.sh,
# tools/dedicated_cores_sweep.sh): configures the project against the LibTorch of that
# machine's Python (a pip wheel, not the Debian package CI uses).
#
# Usage: source tools/torch_wheel_configure.sh
#        torch_wheel_configure BUILD_DIR LOG_DIR [CMAKE_ARGS...]   # 0 on success
# Writes LOG_DIR/cmake.log (and LOG_DIR/cmake-torch-config.log when the fallback ran).

# LibTorch ships its own fmt headers, which come first on the runtime's include path;
# header-only fmt keeps every target off the system libfmt of another version.
torch_wheel_configure_once() {  # BUILD_DIR LOG_DIR [CMAKE_ARGS...]
  local build=$1 log=$2
  shift 2
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
    -DCUDAToolkit_ROOT=/usr/local/cuda -DCMAKE_CXX_FLAGS=-DFMT_HEADER_ONLY=1 "$@" > "$log/cmake.log" 2>&1
}

torch_wheel_configure() {  # BUILD_DIR LOG_DIR [CMAKE_ARGS...]
  local build=$1 log=$2
  shift 2
  torch_wheel_configure_once "$build" "$log" "$@" && return 0
  # LibTorch's own config can fail on a CUDA toolkit it doesn't expect; the runtime
  # needs only the CPU libraries and headers, so name them directly.
  echo "LibTorch's CMake config failed ($log/cmake.log); configuring with its CPU libraries named directly"
  mv "$log/cmake.log" "$log/cmake-torch-config.log"
  local torch
  torch=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  mkdir -p "$build/torch-direct"
  cat > "$build/torch-direct/TorchConfig.cmake" <<CONFIG
set(Torch_FOUND TRUE)
add_library(axonn_torch_direct INTERFACE IMPORTED)
set_target_properties(axonn_torch_direct PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "$torch/include;$torch/include/torch/csrc/api/include"
  INTERFACE_LINK_LIBRARIES "$torch/lib/libtorch.so;$torch/lib/libtorch_cpu.so;$torch/lib/libc10.so"
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1")
set(TORCH_LIBRARIES axonn_torch_direct)
CONFIG
  rm -f "$build/CMakeCache.txt"
  torch_wheel_configure_once "$build" "$log" -DTorch_DIR="$(realpath "$build")/torch-direct" "$@" && return 0
  tail -40 "$log/cmake.log"
  return 1
}
