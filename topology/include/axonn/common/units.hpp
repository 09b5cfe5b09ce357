// Unit constants shared by every module (bytes per GiB, for printing memory).
#pragma once

namespace axonn {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace axonn
