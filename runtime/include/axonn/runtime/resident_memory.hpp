// The process's resident set size, as the kernel counts it (/proc/self/statm: resident
// pages times the page size): what a soak run watches for leaks beside the device and
// host tiers' own counts (device_memory.hpp, host_memory.hpp), which see only tensors.
//
// Example:
//   int64_t rss = axonn::runtime::resident_bytes();   // bytes; 0 where /proc is missing
#pragma once

#include <cstdint>

namespace axonn::runtime {

int64_t resident_bytes();

}  // namespace axonn::runtime
