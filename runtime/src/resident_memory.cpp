// The process's resident set size; see axonn/runtime/resident_memory.hpp.
#include "axonn/runtime/resident_memory.hpp"

#include <unistd.h>

#include <fstream>

namespace axonn::runtime {

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0, resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace axonn::runtime
