// The counting device allocator; see axonn/runtime/device_memory.hpp.
#include "axonn/runtime/device_memory.hpp"

#include <ATen/core/Tensor.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "axonn/common/units.hpp"

namespace axonn::runtime {
namespace {

constexpr size_t kAlignment = 64;  // as c10's own CPU allocator (c10::gAlignment)
constexpr size_t kHeader = kAlignment;  // before each block: its Header, keeping the data aligned
constexpr size_t kSizeClass = 512;      // bytes; a block's capacity is the request rounded up to it
constexpr int64_t kCacheFloor = int64_t{16} << 20;  // bytes the cache may hold whatever the peak

struct Header {
  size_t requested;  // bytes, as counted in live and peak
  size_t capacity;   // bytes after the header: the size class
};
static_assert(sizeof(Header) <= kHeader);

std::atomic<int64_t> g_live{0}, g_peak{0}, g_budget{0};
std::atomic<int64_t> g_high{0};      // the most live bytes since install or empty_cache: the cache's bound
std::atomic<int64_t> g_reserved{0};  // bytes taken from the heap, headers included
std::atomic<bool> g_installed{false}, g_caching{true};

void raise(std::atomic<int64_t>& mark, int64_t value) {
  int64_t seen = mark.load(std::memory_order_relaxed);
  while (value > seen && !mark.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

// Freed blocks by capacity. Never destroyed: tensors may be freed during static destruction.
struct BlockCache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // capacity -> blocks
  int64_t cached_bytes = 0;                                    // their capacities
};
BlockCache& cache() {
  static auto* c = new BlockCache();
  return *c;
}

void release_block(void* block) {
  g_reserved.fetch_sub(static_cast<int64_t>(kHeader + static_cast<Header*>(block)->capacity),
                       std::memory_order_relaxed);
  std::free(block);
}

void release_cached_blocks() {
  std::vector<void*> blocks;
  {
    BlockCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    for (auto& [capacity, list] : c.free_blocks) blocks.insert(blocks.end(), list.begin(), list.end());
    c.free_blocks.clear();
    c.cached_bytes = 0;
  }
  for (void* block : blocks) release_block(block);
}

// A cached block of exactly `capacity`, or nullptr.
void* take_cached(size_t capacity) {
  if (!g_caching.load(std::memory_order_relaxed)) return nullptr;
  BlockCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.free_blocks.find(capacity);
  if (it == c.free_blocks.end() || it->second.empty()) return nullptr;
  void* block = it->second.back();
  it->second.pop_back();
  c.cached_bytes -= static_cast<int64_t>(capacity);
  return block;
}

// `data` is both the tensor's pointer and its context (so LibTorch's raw interface works);
// the block starts kHeader bytes before it.
void counted_free(void* data) {
  if (!data) return;
  void* block = static_cast<char*>(data) - kHeader;
  const Header& h = *static_cast<Header*>(block);
  g_live.fetch_sub(static_cast<int64_t>(h.requested), std::memory_order_relaxed);
  if (g_caching.load(std::memory_order_relaxed)) {
    BlockCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    const int64_t bound = std::max(g_high.load(std::memory_order_relaxed), kCacheFloor);
    if (c.cached_bytes + static_cast<int64_t>(h.capacity) <= bound) {
      c.free_blocks[h.capacity].push_back(block);
      c.cached_bytes += static_cast<int64_t>(h.capacity);
      return;
    }
  }
  release_block(block);
}

void* heap_block(size_t capacity) {
  void* block = nullptr;
  if (posix_memalign(&block, kAlignment, kHeader + capacity) != 0 || !block) {
    release_cached_blocks();  // as the CUDA caching allocator does before it reports out of memory
    block = nullptr;
    if (posix_memalign(&block, kAlignment, kHeader + capacity) != 0 || !block)
      throw InternalError("runtime", fmt::format("the host heap refused {} bytes", capacity), "device allocator",
                          "enough host memory for the device tier");
  }
  g_reserved.fetch_add(static_cast<int64_t>(kHeader + capacity), std::memory_order_relaxed);
  return block;
}

// LibTorch 2.3 made c10::Allocator::allocate non-const and added the pure virtual
// copy_data; 1.13 (Debian's, which CI builds with) has neither. The GPU check
// (tools/gpu_nccl_check.sh) builds against a newer LibTorch.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define AXONN_ALLOCATE_CONST
#define AXONN_ALLOCATOR_COPY_DATA 1
#else
#define AXONN_ALLOCATE_CONST const
#define AXONN_ALLOCATOR_COPY_DATA 0
#endif

class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) AXONN_ALLOCATE_CONST override {
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
    const size_t capacity = (n + kSizeClass - 1) / kSizeClass * kSizeClass;
    void* block = take_cached(capacity);
    if (!block) block = heap_block(capacity);
    *static_cast<Header*>(block) = Header{n, capacity};
    const int64_t now = g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    raise(g_peak, now);
    raise(g_high, now);
    void* data = static_cast<char*>(block) + kHeader;
    return {data, data, &counted_free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counted_free; }
#if AXONN_ALLOCATOR_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#endif
};
#undef AXONN_ALLOCATE_CONST
#undef AXONN_ALLOCATOR_COPY_DATA

}  // namespace

void DeviceMemory::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CountingAllocator allocator;  // lives as long as the process: tensors outlive main
    if (const char* v = std::getenv("AXONN_DEVICE_CACHE"); v && std::string_view(v) == "0") g_caching = false;
    c10::SetCPUAllocator(&allocator, /*priority=*/100);
    g_installed = true;
  });
}

bool DeviceMemory::installed() { return g_installed; }
int64_t DeviceMemory::live_bytes() { return g_live.load(); }
int64_t DeviceMemory::peak_bytes() { return g_peak.load(); }
void DeviceMemory::reset_peak() { g_peak.store(g_live.load()); }
int64_t DeviceMemory::reserved_bytes() { return g_reserved.load(); }
void DeviceMemory::empty_cache() {
  g_high.store(g_live.load());
  release_cached_blocks();
}
void DeviceMemory::set_budget(int64_t bytes) { g_budget.store(bytes > 0 ? bytes : 0); }
int64_t DeviceMemory::budget_bytes() { return g_budget.load(); }
bool DeviceMemory::counts(const at::Tensor& t) {
  return t.defined() && t.has_storage() && t.storage().data_ptr().get_deleter() == &counted_free;
}

}  // namespace axonn::runtime
