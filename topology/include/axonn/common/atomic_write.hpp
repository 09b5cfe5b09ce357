// The one atomic file write of axonn (plans, measurements, traces, calibrated
// topologies, reports): the text goes to PATH.tmp.<pid>, is flushed to disk (fsync),
// renamed over PATH, and the directory is synced, so a reader sees the old file or
// the whole new one, never a torn one, even after a crash.
//
// Example:
//   axonn::write_file_atomically("plan.json", text, "plan");
//   // failure: InputError "[plan] cannot write: plan.json.tmp.123; expected a writable path"
#pragma once

#include <string>

namespace axonn {

// Throws InputError (module `module`) naming the path when it cannot be written.
void write_file_atomically(const std::string& path, const std::string& text, const std::string& module);

}  // namespace axonn
