// How the host heap hands memory to LibTorch. LibTorch's CPU allocator calls
// posix_memalign for every tensor and frees it when the last reference goes. With
// glibc's defaults, blocks above the mmap threshold (128 KiB at start, rising with the
// blocks freed) are fresh mmaps, and the heap top is given back to the kernel past the
// trim threshold, so every step faults its activations in again, page by page. On
// gpt-bench that is 40% of a step, and how much depends on the order in which tensors
// are freed (docs/performance.md). A training loop allocates the same sizes every
// step, as the CUDA caching allocator assumes: keep freed memory in the heap.
#pragma once

#include <cstddef>

namespace axonn::runtime {

struct HostMallocSettings {
  // Blocks above it get their own mmap; 32 MiB is the most glibc accepts on 64 bits.
  std::size_t mmap_threshold_bytes = std::size_t{32} << 20;
  // Free bytes at the heap top kept before trimming (mallopt takes an int: at most 2 GiB).
  std::size_t trim_threshold_bytes = 0x7fffffff;
};

// Applies `s` to this process's glibc heap (mallopt), unless the user set
// MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_, which win, or AXONN_HOST_MALLOC=default
// (glibc's own behaviour, for comparison). Both must be set:
// fixing the trim threshold alone also fixes the mmap threshold at 128 KiB (3-4x
// slower steps). Returns whether both were applied. Call once at start, before
// tensors exist. Without glibc it does nothing and returns false.
bool tune_host_malloc(const HostMallocSettings& s = {});

}  // namespace axonn::runtime
