// axrun's progress output (rank 0): step, loss, tokens per second and the estimated
// time left, with the step's phase times and communication.
//
//   live (every_steps = 0): one short line rewritten in place ("\r", erase to the end)
//                           after every step, ended by a newline after the last step;
//   lines (every_steps = N): a line after every N-th step and after the last one, with
//                            the step's phase times and communication.
//
// tokens/s and the ETA use the mean batch time of the steps after the first (the first
// warms up: allocations, connections), or the first one alone.
//
// Example:
//   ProgressLine p(/*total_steps=*/100, /*every_steps=*/10, /*tokens_per_step=*/2048);
//   p.update(std::cout, step + 1, stats);  // prints at steps 10, 20, ..., 100
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "axonn/runtime/trainer.hpp"

namespace axonn::tools {

class ProgressLine {
 public:
  ProgressLine(int64_t total_steps, int64_t every_steps, double tokens_per_step)
      : total_(total_steps), every_(every_steps), tokens_per_step_(tokens_per_step) {}

  // `step`: 1-based number of the step just finished.
  void update(std::ostream& out, int64_t step, const runtime::StepStats& s) {
    if (step == 1) first_s_ = s.batch_s;
    else timed_s_ += s.batch_s, ++timed_;
    const bool last = step == total_;
    if (every_ > 0 && step % every_ != 0 && !last) return;
    const double mean_s = timed_ > 0 ? timed_s_ / static_cast<double>(timed_) : first_s_;
    const double tokens_per_s = mean_s > 0 ? tokens_per_step_ / mean_s : 0.0;
    const std::string head = fmt::format("step {:>4}/{}  loss {:.4f}  {:.0f} tokens/s  ETA {}", step, total_, s.loss,
                                         tokens_per_s, eta(static_cast<double>(total_ - step) * mean_s));
    const auto& b = s.breakdown;
    const double exposed_pct = b.comm_s > 0 ? 100.0 * b.exposed_comm_s / b.comm_s : 0.0;
    if (every_ == 0) {  // short enough for one terminal line
      fmt::print(out, "\r{}  communication {:.4f} s, {:.0f}% exposed\033[K{}", head, b.comm_s, exposed_pct,
                 last ? "\n" : "");
    } else {
      fmt::print(out,
                 "{}  (batch {:.4f} s: forward {:.4f}  backward {:.4f}  sync {:.4f}  optimizer {:.4f}; communication "
                 "{:.4f} s, {:.0f}% exposed)\n",
                 head, s.batch_s, s.forward_s, s.backward_s, s.grad_sync_s, s.optimizer_s, b.comm_s, exposed_pct);
    }
    out.flush();
  }

  // "H:MM:SS"
  static std::string eta(double seconds) {
    const auto s = static_cast<int64_t>(seconds + 0.5);
    return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  }

 private:
  int64_t total_, every_;
  double tokens_per_step_;
  double first_s_ = 0, timed_s_ = 0;
  int64_t timed_ = 0;
};

}  // namespace axonn::tools
