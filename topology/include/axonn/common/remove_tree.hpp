// The one recursive delete of axonn (checkpoint directories, test scratch): a file or a
// directory with everything under it, symbolic links removed, not followed.
//
// It stands in for std::filesystem::remove_all, which a program cannot rely on when it
// links a PyTorch wheel's LibTorch: those libraries export their own statically linked
// copy of libstdc++'s filesystem symbols, and the program's call binds to it
// (pytorch/pytorch#133437). With LibTorch 2.11+cu130 that copy crashed on a null
// function (docs/runtime.md, "The NCCL backend on a GPU").
//
// Example:
//   std::error_code ec;
//   axonn::remove_tree("ckpt/step-00000003", ec);   // a missing path is not an error
#pragma once

#include <string>
#include <system_error>

namespace axonn {

// Removes `path` and, for a directory, everything under it (depth first, through POSIX
// nftw and remove). A path that does not exist is success. On failure `ec` holds the
// first error and the entries before it are gone.
void remove_tree(const std::string& path, std::error_code& ec);

}  // namespace axonn
