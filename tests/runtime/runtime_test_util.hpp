// What the runtime tests under mpirun share: the world, error measures, plans, and the
// gradient comparison with serial LibTorch.
#pragma once

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "axonn/gpt/gpt_stage.hpp"
#include "axonn/plan/divisibility.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/runtime/data.hpp"
#include "axonn/runtime/idle_wait.hpp"
#include "axonn/runtime/mpi_communicator.hpp"

namespace axonn::test {

extern runtime::MpiCommunicator* g_world;  // set by main()

// Whether the option tests run their whole matrix: every variant on every grid. On 8
// ranks the matrices (ZeRO stages x offload, precisions, bucket sizes, on each of the
// world's grids) are most of the suite's time on a 2-core machine, so there, unless
// AXONN_TEST_FULL=1 (`ctest -L full`, tests/CMakeLists.txt), the grid at index i runs
// variant v only when (i + v) % share == 0: every variant still runs on every
// share-th grid, and every grid runs 1/share of the variants (at least one where the
// test's variant indices cover every remainder: share consecutive indices or more).
inline bool full_matrix() {
  const char* v = std::getenv("AXONN_TEST_FULL");
  return v != nullptr && std::string(v) == "1";
}
// The share of the large matrices (ZeRO x offload, the bitwise offload variants, the
// overlap switches), whose variant indices cover every remainder of 3; the precision
// tests, with two or three variants, keep the default 2.
inline constexpr size_t kLargeMatrixShare = 3;
inline bool runs_variant(size_t grid_index, size_t variant_index, size_t share = 2) {
  return full_matrix() || g_world->size() < 8 || (grid_index + variant_index) % share == 0;
}
// The 20-step loss curves (Gpt, Pipeline, ThreeD) likewise: on 8 ranks every
// third grid of the world trains its 20 steps unless AXONN_TEST_FULL=1; every grid is
// still checked against serial (loss, outputs, every gradient) by the one-step tests.
// Prints the grids left to the full run.
inline constexpr size_t kCurveShare = 3;
inline bool runs_curve(size_t grid_index, const std::string& grid) {
  if (runs_variant(grid_index, 0, kCurveShare)) return true;
  if (g_world->rank() == 0) std::cout << "[ curve    ] " << grid << ": every third grid on 8 ranks (ctest -L full)\n";
  return false;
}

// ||a - b|| / ||b|| (0 when both are 0).
// Sets the process's wait policy (idle_wait.hpp) for a scope, restoring the previous one.
class ScopedWaitPolicy {
 public:
  explicit ScopedWaitPolicy(runtime::WaitPolicy p) : previous_(runtime::wait_policy()) { runtime::set_wait_policy(p); }
  ~ScopedWaitPolicy() { runtime::set_wait_policy(previous_); }
  ScopedWaitPolicy(const ScopedWaitPolicy&) = delete;
  ScopedWaitPolicy& operator=(const ScopedWaitPolicy&) = delete;

 private:
  runtime::WaitPolicy previous_;
};

inline double relative_error(const at::Tensor& a, const at::Tensor& b) {
  const double num = (a.to(at::kDouble) - b.to(at::kDouble)).norm().item<double>();
  const double den = b.to(at::kDouble).norm().item<double>();
  return den == 0 ? num : num / den;
}

// A plan for `desc` on `g` over `seqs` sequences in micro-batches of `micro_seqs` per
// data-parallel group (0: one micro-batch), every overlap switch off, no checkpointing.
inline plan::Plan test_plan(const model::ModelDescription& desc, const topo::Grid& g, int64_t seqs, int64_t micro_seqs = 0) {
  plan::Plan p;
  p.model = desc;
  p.grid = g;
  p.gpus = g.total();
  p.batch = {seqs, micro_seqs > 0 ? micro_seqs : seqs / g.gdata};
  p.overlap = plan::OverlapSettings::synchronous();
  p.activation_checkpointing = false;
  p.precision = plan::Precision::fp32();
  return p;
}

// A test plan on every grid of the world that divides `desc` and `seqs` sequences,
// pipelines included, with two micro-batches or more where the batch allows.
inline std::vector<plan::Plan> world_plans(const model::ModelDescription& desc, int64_t seqs) {
  std::vector<plan::Plan> out;
  for (const auto& g : planner::enumerate_grids(g_world->size())) {
    if (seqs % g.gdata != 0) continue;
    const int64_t mb = planner::default_microbatch_seqs(seqs / g.gdata, g.gz, std::max<int64_t>(g.ginter, 2));
    if (mb <= 0 || plan::divisibility_problem(desc, g, seqs, mb)) continue;
    out.push_back(test_plan(desc, g, seqs, mb));
  }
  return out;
}

// A test plan on each of `grids` (tensor modes: sequence groups, the 2d layout), with the
// default micro-batch over its replicas (two or more where the batch allows); the grids
// that do not divide `desc` and `seqs` go to `skipped` with the reason.
inline std::vector<plan::Plan> plans_on(const std::vector<topo::Grid>& grids, const model::ModelDescription& desc,
                                        int64_t seqs, std::vector<std::string>* skipped) {
  std::vector<plan::Plan> out;
  for (const auto& g : grids) {
    const int64_t mb = seqs % g.replicas() ? 0
                                           : planner::default_microbatch_seqs(seqs / g.replicas(), g.gz,
                                                                              std::max<int64_t>(g.ginter, 2));
    std::optional<std::string> why = mb > 0 ? plan::divisibility_problem(desc, g, seqs, mb)
                                            : std::optional<std::string>("no micro-batch size");
    if (why) skipped->push_back(g.to_string() + ": " + *why);
    else out.push_back(test_plan(desc, g, seqs, mb));
  }
  return out;
}

inline std::string describe_plan(const plan::Plan& p) {
  return p.grid.to_string() + ", " + std::to_string(p.microbatches()) + " micro-batch(es)" +
         (p.activation_checkpointing ? ", checkpointing" : "");
}

// The forward and backward of every micro-batch with the gradients synchronised (the
// step without the optimizer); returns the loss summed over the ranks (the mean loss
// of the batch).
inline at::Tensor loss_and_gradients(gpt::GptStage& run, const at::Tensor& batch) {
  return at::full({1}, run.trainer.gradients(batch).loss, batch.options().dtype(at::kDouble));
}

inline const at::Tensor& serial_parameter(gpt::SerialGpt& serial, const std::string& name) {
  for (const auto& [n, t] : serial.named_parameters())
    if (n == name) return t;
  throw std::runtime_error("no serial parameter " + name);
}

// The largest relative error over every parameter's gathered gradient (this rank's stage).
inline double worst_gradient_error(gpt::ParallelGpt& par, gpt::SerialGpt& serial) {
  auto grads = par.gather(true);
  double worst = 0;
  for (const auto& [name, grad] : grads)
    worst = std::max(worst, relative_error(grad, serial_parameter(serial, name).grad()));
  return worst;
}

// The serial reference of one step: a GPT with the weights of `weight_seed`, batch 0 of
// the synthetic tokens of `data_seed`, its loss, and (backward done) its gradients.
struct SerialStep {
  gpt::SerialGpt serial;
  at::Tensor batch, loss;
  SerialStep(const gpt::GptConfig& cfg, int64_t seqs, uint64_t weight_seed, uint64_t data_seed)
      : serial(cfg, weight_seed),
        batch(runtime::make_token_source("", cfg.vocab, seqs, cfg.seq_len, data_seed)->batch(0)),
        loss(serial.loss(batch)) {
    loss.backward();
  }
};

// A tensor mode's plans against `ref`, each twice: synchronous, and with every overlap,
// a cache of 2 layers, small buckets and activation checkpointing. Loss and every
// gradient within 1e-5; `check(plan, run)` adds the mode's own expectations. Rank 0
// prints the plans run and those skipped, under `label`.
inline void expect_plans_equal_serial(const std::vector<plan::Plan>& plans, const std::vector<std::string>& skipped,
                                      const gpt::GptConfig& cfg, SerialStep& ref, const char* label,
                                      const std::function<void(const plan::Plan&, gpt::GptStage&)>& check) {
  for (auto p : plans)
    for (bool everything : {false, true}) {
      p.activation_checkpointing = everything;
      if (everything) {
        p.overlap = plan::OverlapSettings{};
        p.overlap.cache_all_gather_layers = 2;
        p.overlap.bucket_bytes = 8000;  // several buckets
      }
      runtime::ProcessGrid pg(*g_world, p.grid, p.placement_order);
      gpt::GptStage run(p, pg, cfg, ref.serial.named_parameters(), nullptr);
      check(p, run);
      const std::string what = describe_plan(p) + (everything ? ", every overlap" : ", synchronous");
      EXPECT_LT(relative_error(loss_and_gradients(run, ref.batch), ref.loss.detach().view({1})), 1e-5) << what;
      EXPECT_LT(worst_gradient_error(run.model, ref.serial), 1e-5) << what << ": the worst gradient";
    }
  if (g_world->rank() == 0) {
    for (const auto& p : plans)
      std::printf("  [%s] %s: equal to serial, synchronous and with every overlap\n", label, p.grid.to_string().c_str());
    for (const auto& s : skipped) std::printf("  [%s] skipped %s\n", label, s.c_str());
  }
}

// The serial reference of a training run: `steps` steps of plain LibTorch Adam with
// gradient-norm clipping on `serial`, batch s = source.batch(s); the loss of each step.
// Each step's gradient is summed over the micro-batches that `replicas` data-parallel
// replicas of `microbatches` micro-batches each run (replica-major, as local_microbatch
// splits the batch), each micro-batch's mean loss weighted by its share of the tokens:
// the runtime's order of summation, so that directions whose gradient is only rounding
// noise (e.g. a key bias: softmax ignores it) get the same noise.
inline std::vector<double> serial_accumulation_curve(gpt::SerialGpt& serial, runtime::TokenSource& source, int steps,
                                                     double lr, double clip, int64_t replicas, int64_t microbatches) {
  std::vector<at::Tensor> sp;
  for (auto& [n, t] : serial.named_parameters()) sp.push_back(t);
  torch::optim::Adam adam(sp, torch::optim::AdamOptions(lr));
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    adam.zero_grad();
    const at::Tensor batch = source.batch(s);
    const int64_t per_mb = batch.size(0) / replicas / microbatches;
    double loss = 0;
    for (int64_t r = 0; r < replicas; ++r)
      for (int64_t mb = 0; mb < microbatches; ++mb) {
        at::Tensor l = serial.loss(batch.narrow(0, (r * microbatches + mb) * per_mb, per_mb)) /
                       static_cast<double>(replicas * microbatches);
        l.backward();
        loss += l.item<double>();
      }
    torch::nn::utils::clip_grad_norm_(sp, clip);
    adam.step();
    losses.push_back(loss);
  }
  return losses;
}

// Trains `run` on source.batch(0), source.batch(1), ... for serial_losses.size() steps;
// returns the largest |loss - serial_losses[step]|.
inline double worst_loss_deviation(gpt::GptStage& run, runtime::TokenSource& source,
                                   const std::vector<double>& serial_losses) {
  double worst = 0;
  for (size_t s = 0; s < serial_losses.size(); ++s)
    worst = std::max(worst, std::abs(run.trainer.step(source.batch(static_cast<int64_t>(s))).loss - serial_losses[s]));
  return worst;
}

// The same on whole batches.
inline std::vector<double> serial_loss_curve(gpt::SerialGpt& serial, runtime::TokenSource& source, int steps, double lr,
                                             double clip) {
  return serial_accumulation_curve(serial, source, steps, lr, clip, 1, 1);
}

// The serial reference of the 20-step runs: Adam (lr 3e-3) with a small clip (0.5, so
// that clipping is active) on the synthetic tokens of `data_seed` from the weights of
// `weight_seed`; `initial` keeps those weights for the parallel runs, `serial` is trained.
struct SerialRun {
  static constexpr int kSteps = 20;
  static constexpr double kLr = 3e-3, kClip = 0.5;
  std::unique_ptr<runtime::TokenSource> source;
  gpt::SerialGpt serial, initial;
  std::vector<double> losses;
  SerialRun(const gpt::GptConfig& cfg, int64_t seqs, uint64_t data_seed, uint64_t weight_seed)
      : source(runtime::make_token_source("", cfg.vocab, seqs, cfg.seq_len, data_seed)),
        serial(cfg, weight_seed),
        initial(cfg, weight_seed),
        losses(serial_loss_curve(serial, *source, kSteps, kLr, kClip)) {}
  static runtime::TrainerOptions options() { return runtime::TrainerOptions{kLr, kClip}; }
  bool trained() const { return std::abs(losses.front() - losses.back()) > 1e-3; }
};

}  // namespace axonn::test
