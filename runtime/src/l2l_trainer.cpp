// The executor of an L2L step; see axonn/runtime/l2l_trainer.hpp.
#include "axonn/runtime/l2l_trainer.hpp"

#include "axonn/common/clock.hpp"
#include "axonn/common/error.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/runtime/host_memory.hpp"
#include "axonn/runtime/parameter_server.hpp"

namespace axonn::runtime {

using schedule::L2LOp;

namespace {

// One stashed activation: on the device, or flat in the host tier with its shape.
struct Stashed {
  at::Tensor tensor;
  std::vector<int64_t> shape;
  bool on_host = false;

  static Stashed keep(const at::Tensor& t, plan::StashTier tier) {
    Stashed s;
    s.shape = t.sizes().vec();
    if (tier == plan::StashTier::Host) {
      s.tensor = HostMemory::empty(t.numel(), t.scalar_type());
      s.tensor.copy_(t.reshape({-1}));
      s.on_host = true;
    } else {
      s.tensor = t.detach();
    }
    return s;
  }
  at::Tensor load() const {
    if (!on_host) return tensor;
    at::Tensor d = at::empty(shape, tensor.options());
    d.view({-1}).copy_(tensor);
    return d;
  }
};

}  // namespace

struct L2LTrainer::Impl {
  ProcessGrid& grid;
  std::vector<L2LUnit> units;
  plan::StashTier tier;
  int64_t units_expected;
  int64_t microbatches;
  std::vector<schedule::L2LInstruction> program;
  ParameterServer eps;

  // The step's state.
  at::Tensor batch;
  topo::Coords coords{};
  int64_t micro_seqs = 0;
  double global_tokens = 0;
  std::vector<std::vector<Stashed>> stash;  // [unit][micro-batch]: the unit's output (units 0 .. N-2)
  std::vector<at::Tensor> grads;            // [micro-batch]: the loss's gradient w.r.t. the visited unit's output
  at::Tensor loss_sum;

  Impl(ProcessGrid& g, const plan::Plan& p, TrainerOptions o)
      : grid(g),
        tier(p.l2l.stash),
        units_expected(p.model.num_units),
        microbatches(p.microbatches()),
        program(schedule::l2l_program(p.model.num_units, microbatches, p.l2l.prefetch)),
        eps(g.data(), AdamSettings{o.learning_rate}, o.max_grad_norm) {
    if (p.strategy != plan::Strategy::L2L)
      throw InternalError("runtime", "L2L trainer for a plan of strategy " + std::string(plan::strategy_name(p.strategy)),
                          "plan of " + p.model.name, "an l2l plan");
  }

  at::Tensor tokens(int64_t mb) const { return local_microbatch(batch, grid.grid(), coords, micro_seqs, mb); }

  void forward(int64_t l, int64_t mb, StepStats& s) {
    const double t0 = now_s();
    at::NoGradGuard no_grad;
    StageEngine& se = *units[static_cast<size_t>(l)].engine;
    const at::Tensor x = l == 0 ? at::Tensor() : stash[static_cast<size_t>(l - 1)][static_cast<size_t>(mb)].load();
    se.begin_forward(mb);
    at::Tensor y = units[static_cast<size_t>(l)].model->forward(x, tokens(mb), global_tokens);
    se.end_forward();
    stash[static_cast<size_t>(l)][static_cast<size_t>(mb)] = Stashed::keep(y, tier);
    s.forward_s += now_s() - t0;
  }

  void backward(int64_t l, int64_t mb, StepStats& s) {
    const double t0 = now_s();
    const auto ul = static_cast<size_t>(l), umb = static_cast<size_t>(mb);
    StageEngine& se = *units[ul].engine;
    at::Tensor x;
    if (l > 0) {
      x = stash[ul - 1][umb].load().detach().requires_grad_(true);
      stash[ul - 1][umb] = Stashed();  // its last use
    }
    se.begin_forward(mb);  // the recompute
    at::Tensor y = units[ul].model->forward(x, tokens(mb), global_tokens);
    se.end_forward();
    se.begin_backward(mb);
    if (ul + 1 == units.size()) {
      loss_sum += y.detach().to(at::kDouble);
      y.backward();
    } else {
      y.backward(grads[umb]);
    }
    se.end_backward();
    grads[umb] = l > 0 ? x.grad() : at::Tensor();
    s.backward_s += now_s() - t0;
  }

  void run_step(const at::Tensor& global_batch, StepStats& s) {
    if (static_cast<int64_t>(units.size()) != units_expected)
      throw InternalError("runtime", "L2L step with " + std::to_string(units.size()) + " units added",
                          "L2LTrainer::step", std::to_string(units_expected) + " (the model's pipeline units)");
    batch = global_batch;
    global_tokens = static_cast<double>(global_batch.size(0) * (global_batch.size(1) - 1));
    micro_seqs = global_batch.size(0) / grid.grid().gdata / microbatches;
    coords = grid.layout().coords_of(grid.world().rank());
    stash.assign(units.size(), std::vector<Stashed>(static_cast<size_t>(microbatches)));
    grads.assign(static_cast<size_t>(microbatches), at::Tensor());
    loss_sum = at::zeros({1}, at::kDouble);
    for (const auto& in : program) {
      switch (in.op) {
        case L2LOp::Fetch: eps.fetch(in.unit); break;
        case L2LOp::Prefetch: eps.prefetch(in.unit); break;
        case L2LOp::Forward: forward(in.unit, in.microbatch, s); break;
        case L2LOp::Backward: backward(in.unit, in.microbatch, s); break;
        case L2LOp::Release: eps.release(in.unit); break;
        case L2LOp::Push:
          units[static_cast<size_t>(in.unit)].engine->reduce_gradients();
          eps.push(in.unit);
          break;
        case L2LOp::WaitUpdates: {
          const double t0 = now_s();
          s.grad_norm = eps.wait_updates();
          s.optimizer_s = now_s() - t0;
          break;
        }
      }
    }
    grads.clear();
    all_reduce_now(grid.data(), loss_sum);  // the other replicas' sequences
    s.loss = loss_sum.item<double>();
    s.fetch_wait_s = eps.take_fetch_wait_s();
    s.copy_s = eps.take_copy_s();
    s.push_s = eps.take_push_s();
    s.server_s = eps.take_server_s();
  }
};

L2LTrainer::L2LTrainer(ProcessGrid& grid, const plan::Plan& plan, TrainerOptions options)
    : impl_(std::make_unique<Impl>(grid, plan, options)) {}

void L2LTrainer::add_unit(L2LUnit unit) {
  AXONN_ASSERT(unit.model && unit.engine);
  impl_->eps.add_unit(unit.model->parameters());
  impl_->units.push_back(unit);
}

L2LTrainer::~L2LTrainer() = default;

StepStats L2LTrainer::step(const at::Tensor& global_batch) {
  StepStats s;
  const double t0 = now_s();
  impl_->run_step(global_batch, s);
  s.batch_s = now_s() - t0;
  return s;
}

const std::vector<schedule::L2LInstruction>& L2LTrainer::program() const { return impl_->program; }

std::vector<std::pair<std::string, at::Tensor>> L2LTrainer::master_weights() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t u = 0; u < impl_->units.size(); ++u) {
    const auto masters = impl_->eps.master(static_cast<int64_t>(u));
    const auto& params = impl_->units[u].model->parameters();
    for (size_t i = 0; i < params.size(); ++i) out.emplace_back(params[i].name, masters[i]);
  }
  return out;
}

std::vector<Parameter> L2LTrainer::parameters() const { return impl_->eps.parameters(); }
TrainingState L2LTrainer::state() const { return impl_->eps.state(); }
void L2LTrainer::load_state(const TrainingState& s) { impl_->eps.load_state(s); }

}  // namespace axonn::runtime
