// The host memory tier: what a strategy places off the device (the offloaded optimizer's
// fp32 master weights and Adam moments; later ZeRO's and L2L's). Its tensors come from
// the heap directly and are wrapped with at::from_blob, so they never pass through
// LibTorch's allocator and the device tier (device_memory.hpp) does not count them;
// this tier counts them instead, with its own live and peak bytes.
//
// Only copies should touch host tensors (copy_ in and out of device buffers): an
// operation that returns a new tensor allocates it on the device tier.
//
// On a CUDA LibTorch the same interface would hand out pinned memory (cudaHostAlloc),
// so that the copies to and from the device run asynchronously on a stream; that build
// does not exist here, so only the heap path is compiled and tested.
//
// Example:
//   at::Tensor master = runtime::HostMemory::empty(n, at::kFloat);   // n fp32 on the host
//   master.copy_(device_weights);
//   runtime::HostMemory::live_bytes();   // 4 * n, rounded up to 64 bytes
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace axonn::runtime {

class HostMemory {
 public:
  // An uninitialised contiguous 1-D tensor of `numel` elements in the host tier,
  // 64-byte aligned; its bytes return to the heap (and the count) when the last
  // reference goes. Throws InternalError when the heap refuses.
  static at::Tensor empty(int64_t numel, at::ScalarType dtype);
  static at::Tensor zeros(int64_t numel, at::ScalarType dtype);

  static int64_t live_bytes();
  static int64_t peak_bytes();  // the most live bytes since the last reset_peak()
  static void reset_peak();     // the peak restarts from the live bytes
};

}  // namespace axonn::runtime
