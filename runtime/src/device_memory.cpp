// The counting device allocator; see axonn/runtime/device_memory.hpp.
#include "axonn/runtime/device_memory.hpp"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "axonn/common/units.hpp"

namespace axonn::runtime {
namespace {

constexpr size_t kAlignment = 64;  // as c10's own CPU allocator (c10::gAlignment)
constexpr size_t kHeader = kAlignment;  // before each block: its size, keeping the data aligned

std::atomic<int64_t> g_live{0}, g_peak{0}, g_budget{0};
std::atomic<bool> g_installed{false};

void raise_peak(int64_t live) {
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

// `data` is both the tensor's pointer and its context (so LibTorch's raw interface works);
// the block starts kHeader bytes before it.
void counted_free(void* data) {
  if (!data) return;
  void* block = static_cast<char*>(data) - kHeader;
  g_live.fetch_sub(static_cast<int64_t>(*static_cast<size_t*>(block)), std::memory_order_relaxed);
  std::free(block);
}

class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const override {
    if (n == 0) return {nullptr, nullptr, &counted_free, c10::Device(c10::DeviceType::CPU)};
    const auto bytes = static_cast<int64_t>(n);
    const int64_t budget = g_budget.load(std::memory_order_relaxed);
    const int64_t live = g_live.load(std::memory_order_relaxed);
    if (budget > 0 && live + bytes > budget)
      throw OutOfDeviceMemory(
          fmt::format("out of device memory: {:.1f} MiB more with {:.1f} MiB live (peak {:.1f} MiB) "
                      "exceeds the budget of {:.1f} MiB",
                      static_cast<double>(n) / kBytesPerMiB, static_cast<double>(live) / kBytesPerMiB,
                      static_cast<double>(g_peak.load()) / kBytesPerMiB, static_cast<double>(budget) / kBytesPerMiB),
          "--device-memory", "a budget above the plan's peak (axrun's measurement JSON) or a plan that fits");
    void* block = nullptr;
    if (posix_memalign(&block, kAlignment, kHeader + n) != 0 || !block)
      throw InternalError("runtime", fmt::format("the host heap refused {} bytes", n), "device allocator",
                          "enough host memory for the device tier");
    *static_cast<size_t*>(block) = n;
    raise_peak(g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    void* data = static_cast<char*>(block) + kHeader;
    return {data, data, &counted_free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counted_free; }
};

}  // namespace

void DeviceMemory::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CountingAllocator allocator;  // lives as long as the process: tensors outlive main
    c10::SetCPUAllocator(&allocator, /*priority=*/100);
    g_installed = true;
  });
}

bool DeviceMemory::installed() { return g_installed; }
int64_t DeviceMemory::live_bytes() { return g_live.load(); }
int64_t DeviceMemory::peak_bytes() { return g_peak.load(); }
void DeviceMemory::reset_peak() { g_peak.store(g_live.load()); }
void DeviceMemory::set_budget(int64_t bytes) { g_budget.store(bytes > 0 ? bytes : 0); }
int64_t DeviceMemory::budget_bytes() { return g_budget.load(); }

}  // namespace axonn::runtime
