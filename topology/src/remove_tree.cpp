// The recursive delete; see axonn/common/remove_tree.hpp.
#include "axonn/common/remove_tree.hpp"

#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

namespace axonn {
namespace {

thread_local int t_failure = 0;  // errno of the first entry that could not be removed

int remove_entry(const char* path, const struct stat* /*info*/, int /*type*/, struct FTW* /*where*/) {
  if (std::remove(path) == 0 || errno == ENOENT) return 0;
  t_failure = errno;
  return 1;  // stops the walk
}

}  // namespace

void remove_tree(const std::string& path, std::error_code& ec) {
  ec.clear();
  struct stat info {};
  // Not there (a missing component, or one that is not a directory): nothing to remove,
  // as std::filesystem::remove_all has it.
  auto missing = [](int e) { return e == ENOENT || e == ENOTDIR; };
  if (::lstat(path.c_str(), &info) != 0) {
    if (!missing(errno)) ec.assign(errno, std::generic_category());
    return;
  }
  t_failure = 0;
  constexpr int kOpenDirectories = 16;  // file descriptors nftw may hold at once
  const int rc = ::nftw(path.c_str(), remove_entry, kOpenDirectories, FTW_DEPTH | FTW_PHYS);
  if (rc == 0) return;
  const int e = t_failure != 0 ? t_failure : errno;
  if (t_failure == 0 && missing(e)) return;  // removed by someone else since lstat
  ec.assign(e, std::generic_category());
}

}  // namespace axonn
