// The threads one rank computes on; see axonn/runtime/compute_threads.hpp.
#include "axonn/runtime/compute_threads.hpp"

#include <dlfcn.h>

#include <fmt/format.h>
#include <torch/torch.h>

#include "axonn/common/error.hpp"

namespace axonn::runtime {
namespace {

// OpenBLAS's controls, looked up in the loaded libraries: LibTorch reaches the BLAS
// through libblas.so.3, whichever implementation that names, so none is linked here.
template <class F>
F* openblas_symbol(const char* name) {
  return reinterpret_cast<F*>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

void set_compute_threads(int threads) {
  if (threads < 1)
    throw InternalError("runtime", fmt::format("compute threads {}", threads), "set_compute_threads", "at least 1");
  at::set_num_threads(threads);
  if (auto* set = openblas_symbol<void(int)>("openblas_set_num_threads")) set(threads);
}

int blas_threads() {
  auto* get = openblas_symbol<int()>("openblas_get_num_threads");
  return get ? get() : -1;
}

}  // namespace axonn::runtime
