// The device memory tier, counted. LibTorch here is CPU-only, so "device memory" is
// what a GPU would hold: every tensor LibTorch's CPU allocator hands out. install()
// replaces that allocator (c10::SetCPUAllocator) with one that counts live and peak
// bytes and can enforce a budget, failing an allocation past it as a GPU runs out of
// memory. Memory a strategy places off the device (the host tier: offloaded optimizer
// state, master weights) must not come from this allocator.
//
// Bytes are those requested (a tensor's storage size), as the CUDA caching allocator's
// allocated_bytes counts them: the same allocations give the same peak on every run
// (the heap's own rounding and the 64-byte header of each block are not counted).
// Tensors allocated before install() are not counted, nor freed from the count.
//
// Freed blocks are cached, as the CUDA caching allocator caches them: a training loop
// allocates the same sizes every step, so after the first steps every allocation is
// served from blocks of its own size class (512-byte steps) and the host heap below
// sees no more tensor traffic. Without the cache, glibc's heap fragmented step by step
// (its system bytes grew by about 125 KiB per step with its bytes in use flat;
// docs/performance.md, the soak). The cache holds at most the peak live bytes seen
// since the last empty_cache() (or 16 MiB, if more), so reserved bytes stay within
// twice the peak. An allocation the heap refuses empties the cache and is retried.
// AXONN_DEVICE_CACHE=0 turns it off (every free goes to the heap, as before).
//
// On a CUDA LibTorch the same interface would read the CUDA caching allocator's
// statistics (allocated_bytes current/peak) and its per-process memory fraction; that
// build does not exist here, so only the CPU path is compiled and tested.
//
// Example:
//   runtime::DeviceMemory::install();
//   runtime::DeviceMemory::set_budget(2LL << 30);   // 2 GiB; OutOfDeviceMemory past it
//   runtime::DeviceMemory::reset_peak();
//   trainer.step(batch);
//   int64_t peak = runtime::DeviceMemory::peak_bytes();
#pragma once

#include <cstdint>
#include <string>

#include "axonn/common/error.hpp"

namespace at {
class Tensor;
}

namespace axonn::runtime {

// An allocation past the budget (axrun --device-memory). An input error: the plan does
// not fit the memory the user gave it.
class OutOfDeviceMemory : public InputError {
 public:
  OutOfDeviceMemory(const std::string& what, const std::string& where, const std::string& expected)
      : InputError("runtime", what, where, expected) {}
};

class DeviceMemory {
 public:
  // Makes the counting allocator LibTorch's CPU allocator, once per process (later
  // calls do nothing). Thread-safe counters: autograd and the communication threads
  // allocate too.
  static void install();
  static bool installed();

  static int64_t live_bytes();
  static int64_t peak_bytes();  // the most live bytes since the last reset_peak()
  static void reset_peak();     // the peak restarts from the live bytes

  // Bytes held from the heap: the live blocks' and the cached blocks' capacities, headers
  // included (the CUDA caching allocator's reserved_bytes).
  static int64_t reserved_bytes();
  // Gives every cached block back to the heap (after initialization, or a checkpoint
  // load, whose sizes do not recur).
  static void empty_cache();

  // Allocations that would take the live bytes past `bytes` throw OutOfDeviceMemory
  // (and allocate nothing). <= 0: no budget.
  static void set_budget(int64_t bytes);
  static int64_t budget_bytes();

  // Whether `t`'s storage came from this allocator (host-tier tensors, and tensors
  // allocated before install(), did not).
  static bool counts(const at::Tensor& t);
};

}  // namespace axonn::runtime
