// The axplan command line, as a function so tests can run it in-process.
//
//   axplan rank     --model M --topology T --gpus G (--batch-tokens N | --batch-seqs N) [...]
//   axplan plan     ... [--grid gx,gy,gz,gdata,ginter] [--output plan.json]
//   axplan explain  ... --grid gx,gy,gz,gdata,ginter     why one grid is predicted as it is
//   axplan bench    [--gpus 16384] [--model gpt-80b] [--topology frontier] [--repeat R]
//   axplan validate --model M --topology T --gpus G --batch-seqs N --launcher "..." [...]
//   axplan calibrate ...   runs the sibling program axplan-calibrate with the same flags
//
// axplan links neither LibTorch nor MPI; `calibrate` measures with the runtime, so it
// is a program of its own (built with the runtime), reached like git's subcommands.
//
// Returns the process exit code: 0 on success, 2 for usage errors and bad input
// (files, flags, infeasible requests), 3 for a communication failure, 1 for internal
// errors.
//
// Example:
//   std::ostringstream out, err;
//   int rc = axonn::tools::run_axplan({"axplan", "rank", "--model", "gpt-20b", ...}, out, err);
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace axonn::tools {

// Runs the sibling program `program` (e.g. "axplan-calibrate") with `args` (without
// the program name) and returns its exit code; the real one replaces the process.
using ProgramRunner =
    std::function<int(const std::string& program, const std::vector<std::string>& args, std::ostream& err)>;

// `run_program`: how `calibrate` is run (empty: refused with exit code 2).
int run_axplan(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
               const ProgramRunner& run_program = {});

}  // namespace axonn::tools
