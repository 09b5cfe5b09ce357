// Unit constants shared by every module (bytes per MiB and GiB, for printing memory).
#pragma once

namespace axonn {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;
constexpr double kBytesPerGiB = 1024.0 * kBytesPerMiB;

}  // namespace axonn
