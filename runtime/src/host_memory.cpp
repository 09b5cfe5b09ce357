// The host memory tier; see axonn/runtime/host_memory.hpp.
#include "axonn/runtime/host_memory.hpp"

#include <atomic>
#include <cstdlib>
#include <string>

#include "axonn/common/error.hpp"

namespace axonn::runtime {

namespace {

constexpr int64_t kHostAlignment = 64;  // bytes, a cache line (and AVX-512's vector)

std::atomic<int64_t> g_host_live{0}, g_host_peak{0};

void add(int64_t bytes) {
  const int64_t now = g_host_live.fetch_add(bytes) + bytes;
  int64_t peak = g_host_peak.load();
  while (now > peak && !g_host_peak.compare_exchange_weak(peak, now)) {
  }
}

}  // namespace

at::Tensor HostMemory::empty(int64_t numel, at::ScalarType dtype) {
  AXONN_ASSERT(numel >= 0);
  const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
  const int64_t rounded = (std::max<int64_t>(bytes, 1) + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* data = std::aligned_alloc(kHostAlignment, static_cast<size_t>(rounded));
  if (!data)
    throw InternalError("runtime", "the heap refused " + std::to_string(rounded) + " bytes", "host memory tier",
                        "enough host memory for the offloaded state");
  add(rounded);
  return at::from_blob(
      data, {numel},
      [rounded](void* p) {
        std::free(p);
        g_host_live.fetch_sub(rounded);
      },
      at::TensorOptions().dtype(dtype));
}

at::Tensor HostMemory::zeros(int64_t numel, at::ScalarType dtype) {
  at::Tensor t = empty(numel, dtype);
  t.zero_();
  return t;
}

int64_t HostMemory::live_bytes() { return g_host_live.load(); }
int64_t HostMemory::peak_bytes() { return g_host_peak.load(); }
void HostMemory::reset_peak() { g_host_peak.store(g_host_live.load()); }

}  // namespace axonn::runtime
