// Errors shared by every axonn module.
//
// Three typed failures, each carrying "[module] what: where; expected ..." so that a
// user can act on it (see docs/architecture.md):
//  - InputError: bad input (a file, a flag, an infeasible request). Exit code 2.
//  - CommError: a communication library call failed (MPI, NCCL, CUDA). Exit code 3.
//  - InternalError: something that should not happen, reported instead of aborting
//    where the caller can still end cleanly. Exit code 1.
// A programming bug fails AXONN_ASSERT, which aborts with file:line.
//
// Example:
//   throw axonn::InputError("topology", "value must be positive", "perlmutter.json: /gpus_per_node",
//                           "an integer >= 1");
//   // what(): "[topology] value must be positive: perlmutter.json: /gpus_per_node; expected an integer >= 1"
//   catch (const axonn::Error& e) { return axonn::exit_code(e); }   // 2
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace axonn {

enum class ErrorKind { Input, Communication, Internal };

// Exit codes of the command-line programs, by kind of failure.
inline constexpr int kExitUsage = 2;     // bad input
inline constexpr int kExitComm = 3;      // a communication failure (or another rank's)
inline constexpr int kExitInternal = 1;  // an internal error

class Error : public std::runtime_error {
 public:
  ErrorKind kind() const { return kind_; }
  const std::string& module() const { return module_; }

 protected:
  Error(ErrorKind kind, const std::string& module, const std::string& what, const std::string& where,
        const std::string& expected)
      : std::runtime_error(format(module, what, where, expected)), kind_(kind), module_(module) {}

 private:
  static std::string format(const std::string& module, const std::string& what, const std::string& where,
                            const std::string& expected) {
    std::string s = "[" + module + "] " + what;
    if (!where.empty()) s += ": " + where;
    if (!expected.empty()) s += "; expected " + expected;
    return s;
  }
  ErrorKind kind_;
  std::string module_;
};

class InputError : public Error {
 public:
  InputError(const std::string& module, const std::string& what, const std::string& where,
             const std::string& expected)
      : Error(ErrorKind::Input, module, what, where, expected) {}
};

class CommError : public Error {
 public:
  CommError(const std::string& module, const std::string& what, const std::string& where,
            const std::string& expected)
      : Error(ErrorKind::Communication, module, what, where, expected) {}
};

class InternalError : public Error {
 public:
  InternalError(const std::string& module, const std::string& what, const std::string& where,
                const std::string& expected)
      : Error(ErrorKind::Internal, module, what, where, expected) {}
};

inline int exit_code(ErrorKind k) {
  switch (k) {
    case ErrorKind::Input: return kExitUsage;
    case ErrorKind::Communication: return kExitComm;
    case ErrorKind::Internal: return kExitInternal;
  }
  return kExitInternal;
}
inline int exit_code(const Error& e) { return exit_code(e.kind()); }

}  // namespace axonn

#define AXONN_ASSERT(cond)                                                              \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "axonn: internal error: %s:%d: assertion '%s' failed\n",     \
                   __FILE__, __LINE__, #cond);                                          \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
