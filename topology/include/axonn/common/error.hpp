// Errors shared by every axonn module.
//
// Two policies (see docs/architecture.md):
//  - a recoverable failure, usually bad input, throws axonn::Error carrying
//    "[module] what: where; expected ..." so the user can fix the file or flag;
//  - a programming bug fails AXONN_ASSERT, which aborts with file:line.
//
// Example:
//   throw axonn::Error("topology", "value must be positive", "perlmutter.json: /gpus_per_node",
//                      "an integer >= 1");
//   // what(): "[topology] value must be positive: perlmutter.json: /gpus_per_node; expected an integer >= 1"
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace axonn {

// Exit code for usage errors and bad input (files, flags, infeasible requests).
inline constexpr int kExitUsage = 2;

class Error : public std::runtime_error {
 public:
  Error(const std::string& module, const std::string& what, const std::string& where,
        const std::string& expected)
      : std::runtime_error(format(module, what, where, expected)), module_(module) {}

  const std::string& module() const { return module_; }

 private:
  static std::string format(const std::string& module, const std::string& what,
                            const std::string& where, const std::string& expected) {
    std::string s = "[" + module + "] " + what;
    if (!where.empty()) s += ": " + where;
    if (!expected.empty()) s += "; expected " + expected;
    return s;
  }
  std::string module_;
};

}  // namespace axonn

#define AXONN_ASSERT(cond)                                                              \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "axonn: internal error: %s:%d: assertion '%s' failed\n",     \
                   __FILE__, __LINE__, #cond);                                          \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
