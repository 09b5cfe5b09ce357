// The executor of a training step; see axonn/runtime/trainer.hpp.
#include "axonn/runtime/trainer.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "axonn/common/clock.hpp"
#include "axonn/common/error.hpp"
#include "axonn/plan/layout_rules.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/runtime/idle_wait.hpp"
#include "axonn/runtime/tensor_ops.hpp"

namespace axonn::runtime {

using schedule::StepInstruction;
using schedule::StepOp;

namespace {

constexpr int kActivationTag = 1, kGradientTag = 2;

// A pipeline message: this rank's shard of an activation or of its gradient, followed
// by the micro-batch it belongs to, as two elements of the same type (mb / 256 and
// mb % 256: exact in bf16, whose integers are exact to 256 only).
constexpr int64_t kTagElements = 2, kTagBase = 256;
struct Message {
  WorkHandle work;
  at::Tensor buffer;
  int64_t microbatch = -1;
};

}  // namespace

struct Trainer::Impl {
  ProcessGrid& grid;
  ParallelModel& model;
  StageEngine& se;
  TrainerOptions options;
  const schedule::StageSchedule& sched;
  std::unique_ptr<Optimizer> optimizer;

  // The step in progress.
  at::Tensor batch;
  double global_tokens = 0;
  int64_t micro_seqs = 0;
  topo::Coords coords{};
  struct Stash {
    at::Tensor input, output;  // input: the received activation (a leaf), undefined on the first stage
  };
  std::map<int64_t, Stash> stash;
  Message activation_in, gradient_in;
  std::vector<Message> sends;
  std::vector<StepInstruction> executed;
  at::Tensor loss_sum;
  StepStats* stats = nullptr;

  Impl(ProcessGrid& g, ParallelModel& m, StageEngine& e, TrainerOptions o)
      : grid(g), model(m), se(e), options(o), sched(e.schedule()) {
    // ZeRO-3 gathers weights over the data group in every pass: the replicas must run
    // their passes in one order, which the message-driven pipeline does not promise.
    if (sched.optimizer.zero >= 3 && sched.steps.empty() && grid.data().size() > 1)
      throw InputError("runtime", "ZeRO-3 with the message-driven pipeline and " + std::to_string(grid.data().size()) +
                                      " data-parallel replicas",
                       "plan pipeline.schedule (axrun --pipeline-schedule)",
                       "1f1b or gpipe: every replica's stage runs one step program, so the weight gathers of its "
                       "passes happen in one order");
    // ZeRO-3 gathers a weight over data at its fetch; a local weight (2d-broadcast) has none.
    if (sched.optimizer.zero >= 3 && plan::layout_rules(grid.grid().layout).linear_weight_local && grid.data().size() > 1)
      throw InputError("runtime", "ZeRO-3 with the 2d-broadcast layout", "plan optimizer.zero (axrun --zero)",
                       "--zero 0, 1 or 2 (SUMMA's broadcast form moves each rank's own weight block, which ZeRO-3 "
                       "would shard over data), or a 2d plan");
    AdamSettings adam;
    adam.learning_rate = options.learning_rate;
    optimizer = make_optimizer(grid, model.parameters(), sched.optimizer, sched.precision, adam, se.engine().tracer());
    AXONN_ASSERT(optimizer->reduces_data_parallel() == sched.optimizer.reduces_data_parallel());
    se.set_parameters(&model.parameters());
    se.set_gradient_sink(optimizer->gradient_sink());
    se.set_weight_store(optimizer->weight_store());
  }
  ~Impl() {  // the engine may outlive the optimizer
    se.set_gradient_sink(nullptr);
    se.set_weight_store(nullptr);
  }

  int64_t stage() const { return sched.layout.stage; }
  at::Tensor tokens(int64_t mb) { return local_microbatch(batch, grid.grid(), coords, micro_seqs, mb); }
  at::ScalarType dtype() { return model.parameters().front().tensor.scalar_type(); }

  void post(Message& m, int64_t mb, int peer, int tag) {
    int64_t n = 1;
    for (int64_t d : model.activation_shape(micro_seqs / grid.grid().gz)) n *= d;
    m.buffer = at::empty({n + kTagElements}, at::TensorOptions().dtype(dtype()));
    m.microbatch = mb;
    m.work = grid.pipe().recv(m.buffer, peer, tag);
  }

  // Waits for `m` (micro-batch `mb`); returns the payload shaped as an activation.
  at::Tensor take(Message& m, int64_t mb, const char* what) {
    AXONN_ASSERT(m.work && m.microbatch == mb);
    const double t0 = now_s();
    IdleWait idle;
    while (!m.work->test()) {
      se.engine().poll();
      idle.pause();
    }
    stats->recv_wait_s += now_s() - t0;
    m.work.reset();
    const int64_t n = m.buffer.numel() - kTagElements;
    const auto tagged = static_cast<int64_t>(std::llround(m.buffer[n].item<double>())) * kTagBase +
                        static_cast<int64_t>(std::llround(m.buffer[n + 1].item<double>()));
    if (tagged != mb)
      throw InternalError("runtime",
                          "stage " + std::to_string(stage()) + " received the " + what + " of micro-batch " +
                              std::to_string(tagged),
                          "pipeline message", "micro-batch " + std::to_string(mb));
    return m.buffer.narrow(0, 0, n).view(model.activation_shape(micro_seqs / grid.grid().gz));
  }

  void send(const at::Tensor& t, int64_t mb, int peer, int tag) {
    // Completed sends give their buffers back now, not at the step's end: a stage then
    // holds the buffers of the micro-batches in flight only (docs/model.md section 5).
    sends.erase(std::remove_if(sends.begin(), sends.end(), [](Message& s) { return s.work->test(); }), sends.end());
    Message m;
    const at::Tensor mb_tag =
        at::tensor({static_cast<double>(mb / kTagBase), static_cast<double>(mb % kTagBase)}, at::kDouble).to(t.options());
    m.buffer = at::cat({t.detach().reshape({-1}), mb_tag});
    m.microbatch = mb;
    m.work = grid.pipe().send(m.buffer, peer, tag);
    sends.push_back(std::move(m));
  }

  void post_next(Message& m, int64_t mb, int peer, int tag) {
    if (mb < sched.microbatches) post(m, mb, peer, tag);
  }

  void run(const StepInstruction& in) {
    executed.push_back(in);
    const int64_t mb = in.microbatch;
    const int prev = static_cast<int>(stage()) - 1, next = static_cast<int>(stage()) + 1;
    switch (in.op) {
      case StepOp::RecvActivation: {
        at::Tensor a = take(activation_in, mb, "activation");
        stash[mb].input = a.clone().requires_grad_(true);
        post_next(activation_in, mb + 1, prev, kActivationTag);
        break;
      }
      case StepOp::RecvGradient:
        // Taken by the Backward that follows (the received gradient seeds it).
        break;
      case StepOp::Forward: {
        const double t0 = now_s();
        se.begin_forward(mb);
        Stash& s = stash[mb];
        s.output = model.forward(s.input, tokens(mb), global_tokens);
        se.end_forward();
        if (sched.last_stage()) loss_sum += s.output.detach().to(at::kDouble);
        stats->forward_s += now_s() - t0;
        break;
      }
      case StepOp::SendActivation: send(stash[mb].output, mb, next, kActivationTag); break;
      case StepOp::Backward: {
        at::Tensor seed;
        if (!sched.last_stage()) {
          seed = take(gradient_in, mb, "gradient");
          post_next(gradient_in, mb + 1, next, kGradientTag);
        }
        const double t0 = now_s();
        se.begin_backward(mb);
        Stash& s = stash.at(mb);
        if (seed.defined()) s.output.backward(seed);
        else s.output.backward();
        const double t1 = now_s();
        se.end_backward();
        stats->backward_s += t1 - t0;
        stats->grad_sync_s += now_s() - t1;
        s.output = at::Tensor();
        if (sched.first_stage()) stash.erase(mb);
        break;
      }
      case StepOp::SendGradient:
        send(stash.at(mb).input.grad(), mb, prev, kGradientTag);
        stash.erase(mb);
        break;
      case StepOp::ReduceGradients: {
        const double t0 = now_s();
        {
          CollectiveWaitsAsMessages waiting;  // for the neighbours to take them, as a message
          for (auto& m : sends) m.work->wait();
        }
        sends.clear();
        se.reduce_gradients();
        stats->grad_sync_s += now_s() - t0;
        break;
      }
      case StepOp::OptimizerStep: break;  // step() applies it after the loss is reduced
    }
  }

  // Which message to handle next under the message-driven schedule: 1 the gradient, 2 the
  // activation. Every rank of the stage's tensor group (X, Y, Z) must choose alike, or
  // they would issue their collectives in different orders: the group's first rank
  // watches both receives (gradients first on a tie) and tells the others. With sequence
  // parallelism (no tensor axes) the sequence group, whose ring attention must agree.
  int next_message(const schedule::MessageDrivenStage& rule) {
    Communicator& group = tensor_ops(grid.grid()).lockstep_group(grid);
    int choice = 0;
    const double t0 = now_s();
    if (group.rank() == 0) {
      IdleWait idle;
      while (choice == 0) {
        if (rule.expects_gradient() && gradient_in.work->test()) choice = 1;
        else if (rule.expects_activation() && activation_in.work->test()) choice = 2;
        else se.engine().poll(), idle.pause();
      }
    }
    if (group.size() > 1) {
      at::Tensor c = at::full({1}, choice, at::kInt);
      CollectiveWaitsAsMessages waiting;  // the others wait, through the first rank, for the stage's next message
      all_reduce_now(group, c, ReduceOp::Max);
      choice = c.item<int>();
    }
    stats->recv_wait_s += now_s() - t0;
    return choice;
  }

  // The message-driven program: whichever message arrives next drives the rule.
  void run_message_driven() {
    schedule::MessageDrivenStage rule(stage(), sched.stages, sched.microbatches, sched.limit);
    std::vector<StepInstruction> todo;
    rule.start(todo);
    for (const auto& in : todo) run(in);
    while (!rule.done()) {
      todo.clear();
      if (next_message(rule) == 1) {
        run({StepOp::RecvGradient, static_cast<int32_t>(rule.next_gradient())});
        rule.on_gradient(rule.next_gradient(), todo);  // its Backward takes the message
      } else {
        const int64_t mb = rule.next_activation();
        run({StepOp::RecvActivation, static_cast<int32_t>(mb)});
        rule.on_activation(mb, todo);
      }
      for (const auto& in : todo) run(in);
    }
    run({StepOp::ReduceGradients, -1});
    run({StepOp::OptimizerStep, -1});
  }

  // Every instruction of the step up to and including OptimizerStep (not applied).
  void run_step(const at::Tensor& global_batch, StepStats& s) {
    stats = &s;
    batch = global_batch;
    const auto& g = grid.grid();
    global_tokens = static_cast<double>(global_batch.size(0) * (global_batch.size(1) - 1));
    micro_seqs = global_batch.size(0) / g.replicas() / sched.microbatches;
    coords = grid.layout().coords_of(grid.world().rank());
    loss_sum = at::zeros({1}, at::kDouble);
    executed.clear();
    stash.clear();
    optimizer->zero_grad();
    if (!sched.first_stage()) post(activation_in, 0, static_cast<int>(stage()) - 1, kActivationTag);
    if (!sched.last_stage()) post(gradient_in, 0, static_cast<int>(stage()) + 1, kGradientTag);
    if (sched.steps.empty()) run_message_driven();
    else
      for (const auto& in : sched.steps) run(in);
    // The losses of the other sequences (Z, data) and, with a pipeline, from the last stage.
    se.engine().ops.all_reduce(grid.z_data(), loss_sum, plan::CollectiveKind::ArZData);
    if (auto rows = tensor_ops(grid.grid()).output_rows_split) {  // 3d: the logits' rows split over X
      AXONN_ASSERT(*rows == topo::Axis::X);  // the only kind there is for it (ArXLoss)
      se.engine().ops.all_reduce(grid.axis(*rows), loss_sum, plan::CollectiveKind::ArXLoss);
    }
    {
      CollectiveWaitsAsMessages waiting;  // the first stages arrive long before the last
      se.engine().ops.all_reduce(grid.pipe(), loss_sum, plan::CollectiveKind::ArPipeLoss);
    }
    s.loss = loss_sum.item<double>();
  }
};

Trainer::Trainer(ProcessGrid& grid, ParallelModel& model, StageEngine& engine, TrainerOptions options)
    : impl_(std::make_unique<Impl>(grid, model, engine, options)) {}

Trainer::~Trainer() = default;

const std::vector<StepInstruction>& Trainer::executed() const { return impl_->executed; }

StepStats Trainer::gradients(const at::Tensor& global_batch) {
  StepStats s;
  impl_->run_step(global_batch, s);
  return s;
}

StepStats Trainer::step(const at::Tensor& global_batch) {
  auto& I = *impl_;
  StepStats s;
  Tracer* tracer = I.se.engine().tracer();
  if (tracer) tracer->begin_step();
  const double t_start = now_s();
  I.run_step(global_batch, s);
  const double t0 = now_s();
  const OptimizerPhase ph = I.optimizer->step(I.options.max_grad_norm);
  s.grad_norm = ph.grad_norm;
  s.optimizer_reduce_wait_s = ph.reduce_wait_s;
  const double t1 = now_s();
  s.optimizer_s = t1 - t0;
  s.batch_s = t1 - t_start;
  if (tracer) s.breakdown = tracer->end_step();
  return s;
}

const std::vector<Parameter>& Trainer::parameters() const { return impl_->model.parameters(); }
const Optimizer& Trainer::optimizer() const { return *impl_->optimizer; }
TrainingState Trainer::state() { return impl_->optimizer->state(); }
void Trainer::load_state(const TrainingState& s) { impl_->optimizer->load_state(s); }

}  // namespace axonn::runtime
