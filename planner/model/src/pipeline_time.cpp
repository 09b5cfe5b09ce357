// The pipeline clock; see axonn/planner/pipeline_time.hpp and docs/model.md section 10.
#include "axonn/planner/pipeline_time.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <functional>

#include "axonn/common/error.hpp"
#include "axonn/planner/bandwidth.hpp"

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
  double tail_start = 0, tail = 0;  // its data-parallel tail: start and duration
  int64_t backwards = 0;
};

// A message in flight, ordered by arrival, then gradients before activations, then by
// micro-batch (the order of sending on a link). Messages to different stages may go in
// any order: a stage's clock and rule are its own.
struct Arrival {
  double at;
  uint64_t key;  // bit 63: an activation; bits 32-62: the micro-batch; bits 0-31: the stage
  static Arrival make(double at, bool gradient, int64_t mb, int64_t stage) {
    return {at, (uint64_t{!gradient} << 63) | (static_cast<uint64_t>(mb) << 32) | static_cast<uint64_t>(stage)};
  }
  bool gradient() const { return (key >> 63) == 0; }
  int32_t microbatch() const { return static_cast<int32_t>((key >> 32) & 0x7fffffffu); }
  int64_t stage() const { return static_cast<int64_t>(key & 0xffffffffu); }
  bool operator>(const Arrival& o) const { return at != o.at ? at > o.at : key > o.key; }
};

}  // namespace

struct PipelineScratch::Impl {
  std::vector<Stage> stages;
  std::vector<double> activation_at, gradient_at;  // [stage * M + mb]: arrival at that stage
  std::vector<std::vector<StepInstruction>> programs;  // static schedules
  std::vector<size_t> pc;
  std::vector<Arrival> queue;  // message-driven: a min-heap
  std::vector<schedule::MessageDrivenStage> rules;
  std::vector<StepInstruction> todo;
  std::vector<double> flow_start, flow_alone, flow_end;  // share_data_links
};

PipelineScratch::PipelineScratch() : impl_(std::make_unique<Impl>()) {}
PipelineScratch::~PipelineScratch() = default;
PipelineScratch::PipelineScratch(PipelineScratch&&) noexcept = default;
PipelineScratch& PipelineScratch::operator=(PipelineScratch&&) noexcept = default;
double PipelineScratch::tail_s(int64_t stage) const { return impl_->stages.at(static_cast<size_t>(stage)).tail; }
double PipelineScratch::idle_s(int64_t stage) const { return impl_->stages.at(static_cast<size_t>(stage)).idle; }
double PipelineScratch::end_s(int64_t stage) const { return impl_->stages.at(static_cast<size_t>(stage)).t; }
double PipelineScratch::tail_start_s(int64_t stage) const {
  return impl_->stages.at(static_cast<size_t>(stage)).tail_start;
}

namespace {

// What runs an instruction on a stage's clock (shared by both simulations).
struct Runner {
  const std::vector<StagePasses>& passes;
  const std::vector<double>& link_s;  // per boundary
  int64_t microbatches;
  PipelineScratch::Impl& w;
  std::vector<std::vector<SimulatedInstruction>>* trace;

  double& activation(int64_t s, int64_t mb) { return w.activation_at[static_cast<size_t>(s * microbatches + mb)]; }
  double& gradient(int64_t s, int64_t mb) { return w.gradient_at[static_cast<size_t>(s * microbatches + mb)]; }

  void run(int64_t s, const StepInstruction& in) {
    Stage& st = w.stages[static_cast<size_t>(s)];
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
        st.link_next = std::max(st.t, st.link_next) + link_s[static_cast<size_t>(s)];
        activation(s + 1, mb) = st.link_next;
        break;
      case StepOp::SendGradient:
        st.link_prev = std::max(st.t, st.link_prev) + link_s[static_cast<size_t>(s - 1)];
        gradient(s - 1, mb) = st.link_prev;
        break;
      case StepOp::ReduceGradients:
        st.tail_start = st.t;
        st.tail = p.tail_s;
        st.t += p.tail_s;
        break;
      case StepOp::OptimizerStep:
        st.t += p.optimizer_s;
        st.compute += p.optimizer_s;
        break;
    }
    if (trace) (*trace)[static_cast<size_t>(s)].push_back({in, start, st.t});
  }
};

void run_static(Runner& r, plan::PipelineSchedule schedule, int64_t g, int64_t m) {
  auto& programs = r.w.programs;
  auto& pc = r.w.pc;
  if (programs.size() < static_cast<size_t>(g)) programs.resize(static_cast<size_t>(g));
  pc.assign(static_cast<size_t>(g), 0);
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
  auto& queue = r.w.queue;
  auto& rules = r.w.rules;
  auto& todo = r.w.todo;
  queue.clear();
  rules.clear();
  todo.clear();
  for (int64_t s = 0; s < g; ++s) rules.emplace_back(s, g, m, limit);
  const auto later = std::greater<Arrival>();
  auto execute = [&](int64_t s) {
    for (const auto& in : todo) {
      r.run(s, in);
      if (in.op == StepOp::SendActivation) {
        queue.push_back(Arrival::make(r.activation(s + 1, in.microbatch), false, in.microbatch, s + 1));
        std::push_heap(queue.begin(), queue.end(), later);
      } else if (in.op == StepOp::SendGradient) {
        queue.push_back(Arrival::make(r.gradient(s - 1, in.microbatch), true, in.microbatch, s - 1));
        std::push_heap(queue.begin(), queue.end(), later);
      }
    }
    todo.clear();
  };
  rules[0].start(todo);
  execute(0);
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), later);
    const Arrival a = queue.back();
    queue.pop_back();
    const int64_t s = a.stage();
    Stage& st = r.w.stages[static_cast<size_t>(s)];
    st.idle += std::max(0.0, a.at - st.t);
    st.t = std::max(st.t, a.at);
    if (r.trace)
      (*r.trace)[static_cast<size_t>(s)].push_back(
          {{a.gradient() ? StepOp::RecvGradient : StepOp::RecvActivation, a.microbatch()}, st.t, st.t});
    if (a.gradient()) rules[static_cast<size_t>(s)].on_gradient(a.microbatch(), todo);
    else rules[static_cast<size_t>(s)].on_activation(a.microbatch(), todo);
    execute(s);
  }
  for (int64_t s = 0; s < g; ++s) {
    if (!rules[static_cast<size_t>(s)].done())
      throw InternalError("pipeline", "stage " + std::to_string(s) + " did not run every backward", "message-driven",
                          "a schedule without deadlock");
    todo = {{StepOp::ReduceGradients, -1}, {StepOp::OptimizerStep, -1}};
    execute(s);
  }
}

// The tails of the stages that share a node's link (StagePasses::tail_link_s): each
// stage's transfers as a flow from its tail's start, shared with the other stages'
// (shared_link_ends); its tail, and what follows it, end earlier by what the sharing
// saves against eq. 10's every ring at once.
void share_data_links(const std::vector<StagePasses>& passes, PipelineScratch::Impl& w,
                      std::vector<std::vector<SimulatedInstruction>>* trace) {
  const auto g = static_cast<int64_t>(passes.size());
  for (int64_t first = 0; first < g;) {
    const int64_t per_link = std::max<int64_t>(passes[static_cast<size_t>(first)].tail_link_stages, 1);
    const int64_t end = std::min(g, first + per_link);
    if (per_link > 1) {
      const auto n = static_cast<size_t>(end - first);
      w.flow_start.resize(n), w.flow_alone.resize(n), w.flow_end.resize(n);
      for (size_t i = 0; i < n; ++i) {
        const StagePasses& p = passes[static_cast<size_t>(first) + i];
        w.flow_start[i] = w.stages[static_cast<size_t>(first) + i].tail_start;
        w.flow_alone[i] = p.tail_link_s / static_cast<double>(per_link);
      }
      shared_link_ends(w.flow_start.data(), w.flow_alone.data(), n, w.flow_end.data());
      for (size_t i = 0; i < n; ++i) {
        const auto s = static_cast<size_t>(first) + i;
        const StagePasses& p = passes[s];
        Stage& st = w.stages[s];
        const double tail = (w.flow_end[i] - st.tail_start) + (p.tail_s - p.tail_link_s);
        const double saved = st.tail - tail;  // >= 0: at most per_link flows share
        st.tail = tail;
        st.t -= saved;
        if (!trace) continue;
        for (SimulatedInstruction& in : (*trace)[s]) {  // the tail and the optimizer step after it
          if (in.instruction.op == StepOp::ReduceGradients) in.end_s -= saved;
          else if (in.instruction.op == StepOp::OptimizerStep) in.start_s -= saved, in.end_s -= saved;
        }
      }
    }
    first = end;
  }
}

}  // namespace

PipelineTime simulate_pipeline(const std::vector<StagePasses>& stages, double p2p_s, plan::PipelineSchedule schedule,
                               int64_t microbatches, int64_t limit,
                               std::vector<std::vector<SimulatedInstruction>>* trace, PipelineScratch* scratch) {
  const std::vector<double> link_s(stages.empty() ? 0 : stages.size() - 1, p2p_s);
  return simulate_pipeline(stages, link_s, schedule, microbatches, limit, trace, scratch);
}

PipelineTime simulate_pipeline(const std::vector<StagePasses>& stages, const std::vector<double>& link_s,
                               plan::PipelineSchedule schedule, int64_t microbatches, int64_t limit,
                               std::vector<std::vector<SimulatedInstruction>>* trace, PipelineScratch* scratch) {
  const auto g = static_cast<int64_t>(stages.size());
  AXONN_ASSERT(g >= 1 && microbatches >= 1 && microbatches <= std::numeric_limits<int32_t>::max());
  AXONN_ASSERT(link_s.size() + 1 >= stages.size());
  PipelineScratch own;
  PipelineScratch::Impl& w = (scratch ? *scratch : own).impl();
  w.stages.assign(static_cast<size_t>(g), Stage{});
  w.activation_at.assign(static_cast<size_t>(g * microbatches), kUnknown);
  w.gradient_at.assign(static_cast<size_t>(g * microbatches), kUnknown);
  Runner r{stages, link_s, microbatches, w, trace};
  if (trace) trace->assign(static_cast<size_t>(g), {});
  if (g > 1 && schedule == plan::PipelineSchedule::MessageDriven) run_message_driven(r, g, microbatches, limit);
  else run_static(r, schedule, g, microbatches);
  share_data_links(stages, w, trace);
  PipelineTime out;
  size_t worst = 0;
  for (size_t s = 0; s < w.stages.size(); ++s)
    if (w.stages[s].t > w.stages[worst].t) worst = s;
  const Stage& st = w.stages[worst];
  out.batch_s = st.t;
  out.compute_s = st.compute;
  const double before_tail = st.t - st.tail - stages[worst].optimizer_s;
  out.bubble_fraction = before_tail > 0 ? st.idle / before_tail : 0.0;
  return out;
}

namespace {
// `passes` with their compute `speedup` times faster.
StagePasses computing_faster(StagePasses p, double speedup) {
  const double slower = 1 - 1 / speedup;
  p.forward_s -= slower * p.forward_compute_s;
  p.backward_s -= slower * p.backward_compute_s;
  p.last_backward_s -= slower * p.last_backward_compute_s;
  p.forward_compute_s /= speedup;
  p.backward_compute_s /= speedup;
  p.last_backward_compute_s /= speedup;
  return p;
}
}  // namespace

double lent_core_speedup(const std::vector<StagePasses>& stages, const std::vector<double>& link_s,
                         const std::vector<double>& boundary_share, double cores_per_rank,
                         plan::PipelineSchedule schedule, int64_t microbatches, int64_t limit,
                         std::vector<StagePasses>& lent, PipelineScratch& scratch) {
  const auto g = static_cast<int64_t>(stages.size());
  AXONN_ASSERT(g >= 1 && cores_per_rank > 0 && boundary_share.size() + 1 >= stages.size());
  constexpr int kIterations = 8;           // the sweeps' grids settle in 1 to 6 (docs/model.md)
  constexpr double kSettled = 1e-4;        // relative change of the speedup
  const double most = std::max(1.0, 1 / cores_per_rank);
  double speedup = 1;
  lent = stages;
  for (int i = 0; i < kIterations && g > 1; ++i) {
    simulate_pipeline(lent, link_s, schedule, microbatches, limit, nullptr, &scratch);
    double span = 0, freed = 0;
    for (int64_t s = 0; s < g; ++s) span = std::max(span, scratch.tail_start_s(s));
    for (int64_t s = 0; s < g && span > 0; ++s) {
      double share = 0, boundaries = 0;
      if (s > 0) share += boundary_share[static_cast<size_t>(s - 1)], boundaries += 1;
      if (s + 1 < g) share += boundary_share[static_cast<size_t>(s)], boundaries += 1;
      const double waiting = scratch.idle_s(s) + std::max(0.0, span - scratch.end_s(s));
      freed += waiting / span * (1 - share / boundaries) / static_cast<double>(g);
    }
    const double next = std::min(most, 1 / (1 - std::min(freed, 1 - 1 / most)));
    const bool settled = std::abs(next - speedup) <= kSettled * speedup;
    speedup = next;
    for (int64_t s = 0; s < g; ++s)
      lent[static_cast<size_t>(s)] = computing_faster(stages[static_cast<size_t>(s)], speedup);
    if (settled) break;
  }
  return speedup;
}

}  // namespace axonn::planner
