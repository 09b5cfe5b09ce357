// The pipeline clock; see axonn/planner/pipeline_time.hpp and docs/model.md section 10.
#include "axonn/planner/pipeline_time.hpp"

#include <algorithm>
#include <limits>
#include <queue>

#include "axonn/common/error.hpp"

namespace axonn::planner {

using schedule::StepInstruction;
using schedule::StepOp;

namespace {

constexpr double kUnknown = -1;  // a message not sent yet

struct Stage {
  double t = 0;                   // the stage's clock
  double link_next = 0, link_prev = 0;  // its outgoing links are busy until then
  double compute = 0;
  double idle = 0;                // waiting for messages
  int64_t backwards = 0;
};

// What runs an instruction on a stage's clock (shared by both simulations).
struct Runner {
  const std::vector<StagePasses>& passes;
  double p2p_s;
  int64_t microbatches;
  std::vector<Stage> stages;
  std::vector<double> activation_at, gradient_at;  // [stage * M + mb]: arrival at that stage
  std::vector<std::vector<SimulatedInstruction>>* trace;

  double& activation(int64_t s, int64_t mb) { return activation_at[static_cast<size_t>(s * microbatches + mb)]; }
  double& gradient(int64_t s, int64_t mb) { return gradient_at[static_cast<size_t>(s * microbatches + mb)]; }

  void run(int64_t s, const StepInstruction& in) {
    Stage& st = stages[static_cast<size_t>(s)];
    const StagePasses& p = passes[static_cast<size_t>(s)];
    const double start = st.t;
    const int64_t mb = in.microbatch;
    switch (in.op) {
      case StepOp::RecvActivation:
      case StepOp::RecvGradient: {
        const double at = in.op == StepOp::RecvActivation ? activation(s, mb) : gradient(s, mb);
        st.idle += std::max(0.0, at - st.t);
        st.t = std::max(st.t, at);
        break;
      }
      case StepOp::Forward:
        st.t += p.forward_s;
        st.compute += p.forward_compute_s;
        break;
      case StepOp::Backward: {
        const bool last = ++st.backwards == microbatches;
        st.t += last ? p.last_backward_s : p.backward_s;
        st.compute += last ? p.last_backward_compute_s : p.backward_compute_s;
        break;
      }
      case StepOp::SendActivation:
        st.link_next = std::max(st.t, st.link_next) + p2p_s;
        activation(s + 1, mb) = st.link_next;
        break;
      case StepOp::SendGradient:
        st.link_prev = std::max(st.t, st.link_prev) + p2p_s;
        gradient(s - 1, mb) = st.link_prev;
        break;
      case StepOp::ReduceGradients: st.t += p.tail_s; break;
      case StepOp::OptimizerStep:
        st.t += p.optimizer_s;
        st.compute += p.optimizer_s;
        break;
    }
    if (trace) (*trace)[static_cast<size_t>(s)].push_back({in, start, st.t});
  }
};

void run_static(Runner& r, plan::PipelineSchedule schedule, int64_t g, int64_t m) {
  std::vector<std::vector<StepInstruction>> programs(static_cast<size_t>(g));
  std::vector<size_t> pc(static_cast<size_t>(g), 0);
  for (int64_t s = 0; s < g; ++s) schedule::step_program(schedule, s, g, m, programs[static_cast<size_t>(s)]);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < g; ++s) {
      auto& prog = programs[static_cast<size_t>(s)];
      size_t& i = pc[static_cast<size_t>(s)];
      for (; i < prog.size(); ++i, progress = true) {
        const StepInstruction& in = prog[i];
        if (in.op == StepOp::RecvActivation && r.activation(s, in.microbatch) == kUnknown) break;
        if (in.op == StepOp::RecvGradient && r.gradient(s, in.microbatch) == kUnknown) break;
        r.run(s, in);
      }
    }
  }
  for (int64_t s = 0; s < g; ++s)
    if (pc[static_cast<size_t>(s)] != programs[static_cast<size_t>(s)].size())
      throw InternalError("pipeline", "stage " + std::to_string(s) + " waits for a message no stage sends",
                          plan::pipeline_schedule_name(schedule), "a schedule without deadlock");
}

void run_message_driven(Runner& r, int64_t g, int64_t m, int64_t limit) {
  struct Arrival {
    double at;
    uint32_t seq;  // ties: gradients before activations, then in order of sending
    int32_t stage, mb;
    bool gradient;
    bool operator>(const Arrival& o) const {
      if (at != o.at) return at > o.at;
      if (gradient != o.gradient) return !gradient;
      return seq > o.seq;
    }
  };
  std::vector<Arrival> storage;
  storage.reserve(static_cast<size_t>(4 * g));
  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<Arrival>> queue(std::greater<Arrival>(),
                                                                                   std::move(storage));
  std::vector<schedule::MessageDrivenStage> rules;
  rules.reserve(static_cast<size_t>(g));
  for (int64_t s = 0; s < g; ++s) rules.emplace_back(s, g, m, limit);
  uint32_t seq = 0;
  std::vector<StepInstruction> todo;
  todo.reserve(8);
  auto execute = [&](int64_t s) {
    for (const auto& in : todo) {
      r.run(s, in);
      if (in.op == StepOp::SendActivation)
        queue.push({r.activation(s + 1, in.microbatch), seq++, static_cast<int32_t>(s + 1), in.microbatch, false});
      else if (in.op == StepOp::SendGradient)
        queue.push({r.gradient(s - 1, in.microbatch), seq++, static_cast<int32_t>(s - 1), in.microbatch, true});
    }
    todo.clear();
  };
  rules[0].start(todo);
  execute(0);
  while (!queue.empty()) {
    const Arrival a = queue.top();
    queue.pop();
    Stage& st = r.stages[static_cast<size_t>(a.stage)];
    st.idle += std::max(0.0, a.at - st.t);
    st.t = std::max(st.t, a.at);
    if (r.trace)
      (*r.trace)[static_cast<size_t>(a.stage)].push_back(
          {{a.gradient ? StepOp::RecvGradient : StepOp::RecvActivation, a.mb}, st.t, st.t});
    if (a.gradient) rules[static_cast<size_t>(a.stage)].on_gradient(a.mb, todo);
    else rules[static_cast<size_t>(a.stage)].on_activation(a.mb, todo);
    execute(a.stage);
  }
  for (int64_t s = 0; s < g; ++s) {
    if (!rules[static_cast<size_t>(s)].done())
      throw InternalError("pipeline", "stage " + std::to_string(s) + " did not run every backward", "message-driven",
                          "a schedule without deadlock");
    todo = {{StepOp::ReduceGradients, -1}, {StepOp::OptimizerStep, -1}};
    execute(s);
  }
}

}  // namespace

PipelineTime simulate_pipeline(const std::vector<StagePasses>& stages, double p2p_s, plan::PipelineSchedule schedule,
                               int64_t microbatches, int64_t limit,
                               std::vector<std::vector<SimulatedInstruction>>* trace) {
  const auto g = static_cast<int64_t>(stages.size());
  AXONN_ASSERT(g >= 1 && microbatches >= 1);
  Runner r{stages, p2p_s, microbatches, std::vector<Stage>(static_cast<size_t>(g)),
           std::vector<double>(static_cast<size_t>(g * microbatches), kUnknown),
           std::vector<double>(static_cast<size_t>(g * microbatches), kUnknown), trace};
  if (trace) trace->assign(static_cast<size_t>(g), {});
  if (g > 1 && schedule == plan::PipelineSchedule::MessageDriven) run_message_driven(r, g, microbatches, limit);
  else run_static(r, schedule, g, microbatches);
  PipelineTime out;
  size_t worst = 0;
  for (size_t s = 0; s < r.stages.size(); ++s)
    if (r.stages[s].t > r.stages[worst].t) worst = s;
  const Stage& w = r.stages[worst];
  out.batch_s = w.t;
  out.compute_s = w.compute;
  const double before_tail = w.t - stages[worst].tail_s - stages[worst].optimizer_s;
  out.bubble_fraction = before_tail > 0 ? w.idle / before_tail : 0.0;
  return out;
}

}  // namespace axonn::planner
