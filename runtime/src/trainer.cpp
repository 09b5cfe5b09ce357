// The training step; see axonn/runtime/trainer.hpp.
#include "axonn/runtime/trainer.hpp"

#include <torch/torch.h>

#include <cmath>

#include "axonn/common/clock.hpp"
#include "axonn/runtime/data.hpp"

namespace axonn::runtime {

double clip_gradients(ProcessGrid& grid, std::vector<Parameter>& params, double max_norm) {
  at::Tensor sq = at::zeros({1}, at::kDouble);
  for (auto& p : params) {
    at::Tensor grad = p.tensor.grad();
    if (!grad.defined()) continue;
    sq += grad.to(at::kDouble).pow(2).sum() / static_cast<double>(p.spec.replication(grid.grid()));
  }
  all_reduce_now(grid.model(), sq);
  const double norm = std::sqrt(sq.item<double>());
  const double coef = max_norm / (norm + 1e-6);  // as torch::nn::utils::clip_grad_norm_
  if (max_norm > 0 && coef < 1.0)
    for (auto& p : params)
      if (p.tensor.grad().defined()) p.tensor.mutable_grad().mul_(coef);
  return norm;
}

struct Trainer::Impl {
  ProcessGrid& grid;
  ParallelModel& model;
  plan::Plan plan;
  TrainerOptions options;
  std::unique_ptr<torch::optim::Adam> adam;

  Impl(ProcessGrid& g, ParallelModel& m, const plan::Plan& p, TrainerOptions o)
      : grid(g), model(m), plan(p), options(o) {
    std::vector<at::Tensor> tensors;
    for (auto& prm : model.parameters()) tensors.push_back(prm.tensor);
    adam = std::make_unique<torch::optim::Adam>(tensors, torch::optim::AdamOptions(options.learning_rate));
  }

};

Trainer::Trainer(ProcessGrid& grid, ParallelModel& model, const plan::Plan& plan, TrainerOptions options)
    : impl_(std::make_unique<Impl>(grid, model, plan, options)) {}

Trainer::~Trainer() = default;

StepStats Trainer::step(const at::Tensor& global_batch) {
  auto& I = *impl_;
  StepStats s;
  CommEngine& e = I.model.engine();
  if (e.tracer()) e.tracer()->begin_step();
  const double t_start = now_s();
  I.adam->zero_grad();
  const auto& g = I.grid.grid();
  const int64_t seq_len = global_batch.size(1) - 1;
  const double global_tokens = static_cast<double>(global_batch.size(0) * seq_len);
  const int64_t micro_seqs = I.plan.batch.microbatch_seqs;
  const int64_t micros = global_batch.size(0) / g.gdata / micro_seqs;
  const auto coords = I.grid.layout().coords_of(I.grid.world().rank());
  at::Tensor loss_sum = at::zeros({1}, at::kDouble);
  for (int64_t i = 0; i < micros; ++i) {
    e.begin_microbatch(i == micros - 1);
    at::Tensor tokens = local_microbatch(global_batch, g, coords, micro_seqs, i);
    const double t0 = now_s();
    at::Tensor loss = I.model.loss(tokens, global_tokens);
    const double t1 = now_s();
    e.set_phase(Phase::Backward);
    loss.backward();
    const double t2 = now_s();
    e.finish_backward();  // after the last micro-batch: the data-parallel reductions too
    const double t3 = now_s();
    s.forward_s += t1 - t0;
    s.backward_s += t2 - t1;
    s.grad_sync_s += t3 - t2;
    loss_sum += loss.detach().to(at::kDouble);
  }
  const double t4 = now_s();
  e.all_reduce(I.grid.z_data(), loss_sum, "ar_z_data");  // the losses of the other sequences
  s.grad_norm = clip_gradients(I.grid, I.model.parameters(), I.options.max_grad_norm);
  I.adam->step();
  const double t5 = now_s();
  s.optimizer_s = t5 - t4;
  s.batch_s = t5 - t_start;
  s.loss = loss_sum.item<double>();
  if (e.tracer()) s.breakdown = e.tracer()->end_step();
  return s;
}

}  // namespace axonn::runtime
