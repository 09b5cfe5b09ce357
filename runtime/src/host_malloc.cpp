// Host heap settings; see axonn/runtime/host_malloc.hpp.
#include "axonn/runtime/host_malloc.hpp"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace axonn::runtime {

bool tune_host_malloc(const HostMallocSettings& s) {
#if defined(__GLIBC__)
  for (const char* v : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"})
    if (std::getenv(v)) return false;
  if (const char* mode = std::getenv("AXONN_HOST_MALLOC"); mode && std::string_view(mode) == "default") return false;
  auto as_int = [](std::size_t b) { return static_cast<int>(std::min<std::size_t>(b, 0x7fffffff)); };
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, as_int(s.mmap_threshold_bytes)) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, as_int(s.trim_threshold_bytes)) == 1;
  return mmap_ok && trim_ok;
#else
  (void)s;
  return false;
#endif
}

}  // namespace axonn::runtime
