// 64-bit FNV-1a; see axonn/common/checksum.hpp.
#include "axonn/common/checksum.hpp"

#include <cstdio>

namespace axonn {

uint64_t fnv1a64(const void* data, size_t bytes) {
  constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ULL, kPrime = 0x100000001b3ULL;
  uint64_t h = kOffsetBasis;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * kPrime;
  return h;
}

std::string fnv1a64_hex(const void* data, size_t bytes) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(fnv1a64(data, bytes)));
  return text;
}

}  // namespace axonn
