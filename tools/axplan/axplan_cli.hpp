// The axplan command line, as a function so tests can run it in-process.
//
//   axplan rank  --model M --topology T --gpus G (--batch-tokens N | --batch-seqs N) [...]
//   axplan plan  ... [--grid gx,gy,gz,gdata,ginter] [--output plan.json]
//   axplan bench [--gpus 16384] [--model gpt-80b] [--topology frontier] [--repeat R]
//   mpirun ... axplan calibrate --gpus-per-node G [--model M --batch-seqs N] [-o cluster.json]
//   axplan validate --model M --topology T --gpus G --batch-seqs N --launcher "..." [...]
//
// Returns the process exit code: 0 on success, 2 for usage errors and bad input
// (files, flags, infeasible requests), 1 for internal errors.
//
// Example:
//   std::ostringstream out, err;
//   int rc = axonn::tools::run_axplan({"axplan", "rank", "--model", "gpt-20b", ...}, out, err);
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "calibrate.hpp"

namespace axonn::tools {

// `kernel_timers`: how `calibrate --model` times kernels (empty: refused, exit 2).
int run_axplan(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
               const KernelTimers& kernel_timers = {});

}  // namespace axonn::tools
