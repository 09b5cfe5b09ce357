// The one checksum of axonn: 64-bit FNV-1a over bytes, as 16 hex digits. Checkpoint
// manifests carry it for each file, and a file whose bytes disagree is never loaded.
// Detects corruption and truncation, not tampering (not a cryptographic hash).
//
// Example:
//   std::string h = axonn::fnv1a64_hex(bytes.data(), bytes.size());   // "cbf29ce484222325" for no bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace axonn {

uint64_t fnv1a64(const void* data, size_t bytes);
std::string fnv1a64_hex(const void* data, size_t bytes);

}  // namespace axonn
