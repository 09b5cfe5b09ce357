// Atomic file writes; see axonn/common/atomic_write.hpp.
#include "axonn/common/atomic_write.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "axonn/common/error.hpp"

namespace axonn {
namespace {

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void write_file_atomically(const std::string& path, const std::string& text, const std::string& module) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const std::string& what, const std::string& where, const std::string& expected) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp.c_str());
    throw InputError(module, what + " (" + reason + ")", where, expected);
  };
  {
    Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (f.fd < 0) fail("cannot write", tmp, "a writable path");
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(f.fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("write failed", tmp, "enough disk space");
      done += static_cast<size_t>(n);
    }
    if (::fsync(f.fd) != 0) fail("fsync failed", tmp, "a file system that can sync");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename", tmp + " -> " + path, "a writable directory");
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  Fd d{::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd >= 0) ::fsync(d.fd);  // the rename itself is durable; best effort on odd file systems
}

}  // namespace axonn
