// measure_two_linear: the memory experiment of Colossal-AI's section V-B (seed 004;
// ../shared/reference/seed-spec.md C9) for issue #11. A model of two Linear layers,
// H -> F (column-parallel) then F -> H (row-parallel), no bias, trained under each tensor
// mode on all the ranks, the counting allocator's peak device bytes beside the planner's
// prediction for the same explicit model description and grid.
//
//   mpirun -np N measure_two_linear [--hidden 1024] [--ffn 4096] [--rows 512] [--seq-len 64]
//                                   [--max-error 0.05] [--max-broadcast-error 0.001]
//                                   (exit 1 past either: the CI's checks)
//
// The modes, each on all N ranks (as bench_tensor_modes): 1d 1,N,1; 2d 1,q,q (N = q^2);
// 2.5d 1,2,2,N/4 (Tesseract: 2d with N/4-way depth, the batch split over it); 3d l,l,l
// (N = l^3); and the planner's best AxoNN 3D grid of tensor parallelism alone. Per mode:
//   - fwd+bwd peak: the most live bytes during the forward and backward of one batch
//     (Trainer::gradients, the first step: Adam's state does not exist yet), as the
//     paper measures it (its "max allocated during fwd+bwd"), and its ratio to 1d;
//   - step peak: the most live bytes of a whole training step (step 2: Adam's moments
//     allocated in step 1), beside the planner's MemoryBreakdown::total_bytes() for the
//     plan, which predicts exactly that;
//   - the model state measured (the live bytes between steps) beside the planner's.
// Then, on the 2d and 2.5d grids, SUMMA in its broadcast form (runtime::summa_linear: q
// steps of row and column broadcasts, the paper's algorithm; the GPT's 2d layers run the
// collective form above): the fwd+bwd peak of one forward and backward of the same two
// layers as q x q blocks (2.5d: and dW's all-reduce over the depth), the bare operators
// without the engine, beside planner::summa_broadcast_peak_bytes (docs/model.md section
// 15, "The broadcast form") and the difference in bytes.
// The loss is the sum of the outputs over the global token count (any fixed scalar
// would do: only the memory is measured; the operators' exactness is tested elsewhere).
// fp32, every overlap switch off except the weights' all-gather prefetch (the planner's
// predicted peak assumes the plan's switches; the default plan's are used).
#include <ATen/Parallel.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "axonn/common/error.hpp"
#include "axonn/common/units.hpp"
#include "axonn/plan/layout_rules.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/planner/summa_broadcast_memory.hpp"
#include "axonn/runtime/compute_threads.hpp"
#include "axonn/runtime/device_memory.hpp"
#include "axonn/runtime/mpi_communicator.hpp"
#include "axonn/runtime/parallel_model.hpp"
#include "axonn/runtime/rank_process.hpp"
#include "axonn/runtime/stage_engine.hpp"
#include "axonn/runtime/summa.hpp"
#include "axonn/runtime/tensor_ops.hpp"
#include "axonn/runtime/trainer.hpp"
#include "axonn/schedule/schedule.hpp"
#include "axonn/topology/topology_io.hpp"
#include "bench_common.hpp"

using namespace axonn;

namespace {

// The explicit model description the planner costs: fc1 (H x F, normal) and fc2 (F x H,
// transposed: AxoNN's row-parallel half), outside any block.
model::ModelDescription two_linear(int64_t hidden, int64_t ffn, int64_t seq_len) {
  return model::model_from_json(
      nlohmann::json{{"name", "two-linear"},
                     {"family", "explicit"},
                     {"description", "Colossal-AI's memory experiment: two Linear layers"},
                     {"seq_len", seq_len},
                     {"hidden", hidden},
                     {"layers",
                      {{{"type", "linear"}, {"name", "fc1"}, {"k", hidden}, {"n", ffn}},
                       {{"type", "linear"}, {"name", "fc2"}, {"k", ffn}, {"n", hidden}, {"role", "row"}}}}},
      "two-linear");
}

// The two layers under the grid's layout, as a ParallelModel the Trainer runs.
class TwoLinear : public runtime::ParallelModel {
 public:
  TwoLinear(runtime::ProcessGrid& grid, runtime::Engine& engine, const schedule::StageSchedule& stage, int64_t hidden,
            int64_t ffn, const at::Tensor& w1, const at::Tensor& w2)
      : grid_(grid), engine_(engine), hidden_(hidden), ffn_(ffn) {
    const auto coords = grid.layout().coords_of(grid.world().rank());
    const runtime::TensorOps& ops = runtime::tensor_ops(grid.grid().layout);
    auto add = [&](const std::string& layer, const at::Tensor& full, model::LinearRole role) {
      const auto spec = ops.matrix(role, 0);
      params_.push_back({layer + ".weight", runtime::shard_of(full, spec, grid.grid(), coords).set_requires_grad(true),
                         spec, full.sizes().vec()});
    };
    add("fc1", w1, model::LinearRole::Column);
    add("fc2", w2, model::LinearRole::Row);
    for (size_t i = 0; i < params_.size(); ++i) {
      const std::string layer = i == 0 ? "fc1" : "fc2";
      const int64_t index = stage.layer_index(layer);
      if (index < 0) throw InternalError("measure_two_linear", "no layer " + layer + " in the stage's schedule", "", "");
      engine_.add_layer(index, &params_[i].tensor);
      index_.push_back(index);
    }
  }
  std::vector<runtime::Parameter>& parameters() override { return params_; }
  at::Tensor forward(const at::Tensor&, const at::Tensor& tokens, double global_tokens) override {
    const topo::Grid& g = grid_.grid();
    // This rank's input block, a function of the tokens: rows = its tokens (3d: a 1/Gy of
    // them, as a normal layer's input there), columns = its share of H.
    const runtime::TensorOps& ops = runtime::tensor_ops(g.layout);
    int64_t rows = tokens.size(0) * (tokens.size(1) - 1);
    int64_t row0 = 0;
    if (ops.input_rows_split) {
      rows /= g.size(*ops.input_rows_split);
      row0 = grid_.coord(*ops.input_rows_split) * rows;
    }
    const topo::Axis cols = plan::layout_rules(g.layout).hidden_axis;
    const int64_t width = hidden_ / g.size(cols);
    at::Tensor x = tokens.narrow(1, 0, tokens.size(1) - 1).reshape({-1}).narrow(0, row0, rows).to(at::kFloat);
    x = (x.unsqueeze(1) * at::arange(1, width + 1, at::kFloat).unsqueeze(0) * (1e-3 / width)).sin();
    const at::Tensor y = ops.linear(engine_, index_[1],
                                    ops.linear(engine_, index_[0], x, {}, runtime::LinearShape{hidden_, ffn_, model::LinearRole::Column}),
                                    {}, runtime::LinearShape{ffn_, hidden_, model::LinearRole::Row});
    return y.sum() / global_tokens;
  }
  std::vector<int64_t> activation_shape(int64_t) const override { return {}; }  // no pipeline

 private:
  runtime::ProcessGrid& grid_;
  runtime::Engine& engine_;
  int64_t hidden_, ffn_;
  std::vector<runtime::Parameter> params_;
  std::vector<int64_t> index_;
};

// SUMMA's broadcast form on the plan's 2d-layout grid 1,q,q,d: rank (z, y) of depth layer
// `data` holds block (z, y) of fc1's and fc2's weights and of its depth layer's input rows
// (tokens / d of them); one forward and backward, the loss the outputs' sum over the
// tokens, and with d > 1 dW summed over the depth (Tesseract's reduction). The most live
// bytes of any rank during it.
double broadcast_fwd_bwd_peak(runtime::MpiCommunicator& world, const plan::Plan& p, const at::Tensor& w1,
                              const at::Tensor& w2, int64_t tokens) {
  runtime::ProcessGrid pg(world, p.grid, p.placement_order);
  const int64_t q = p.grid.gy, z = pg.coord(topo::Axis::Z), y = pg.coord(topo::Axis::Y);
  if (pg.y().rank() != y || pg.z().rank() != z)
    throw InternalError("measure_two_linear", "the Y and Z groups' ranks are not the Y and Z coordinates",
                        "broadcast_fwd_bwd_peak", "SUMMA's row ordered by Y, its column by Z");
  auto block = [&](const at::Tensor& full) {
    const int64_t k = full.size(0) / q, n = full.size(1) / q;
    return full.narrow(0, z * k, k).narrow(1, y * n, n).contiguous().set_requires_grad(true);
  };
  const at::Tensor w1_block = block(w1), w2_block = block(w2);
  const int64_t rows = tokens / (p.grid.gdata * q), width = w1.size(0) / q;
  const int64_t row0 = (pg.coord(topo::Axis::Data) * q + z) * rows, col0 = y * width;
  runtime::DeviceMemory::empty_cache();
  runtime::DeviceMemory::reset_peak();
  {
    // The input block: any values will do (only the memory is measured; Summa.* tests the values).
    const at::Tensor x = at::outer(at::arange(row0, row0 + rows, at::kFloat), at::arange(col0 + 1, col0 + width + 1, at::kFloat))
                             .mul_(1e-6)
                             .sin_();
    const at::Tensor loss =
        runtime::summa_linear(pg.y(), pg.z(), runtime::summa_linear(pg.y(), pg.z(), x, w1_block), w2_block).sum() /
        static_cast<double>(tokens);
    loss.backward();
    if (p.grid.gdata > 1)
      for (const at::Tensor& w : {w1_block, w2_block}) runtime::all_reduce_now(pg.data(), w.grad());
  }
  return tools::max_over_ranks(world, static_cast<double>(runtime::DeviceMemory::peak_bytes()));
}

}  // namespace

int main(int argc, char** argv) {
  runtime::RankProcess process(&argc, &argv);
  runtime::MpiCommunicator& world = process.world();
  int64_t hidden = 1024, ffn = 4096, rows = 512, seq_len = 64;
  std::string topology_name = "perlmutter";
  double max_error = 0, max_broadcast_error = 0;
  CLI::App app{"measure_two_linear: peak memory of two Linear layers under each tensor mode, beside the planner's"};
  app.add_option("--hidden", hidden, "H: fc1 is H x F, fc2 F x H")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--ffn", ffn, "F")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--rows", rows, "tokens per batch (the paper's batch of 512)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seq-len", seq_len, "tokens per sequence (rows / seq-len sequences)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--topology", topology_name, "topology the planner plans on (memory does not depend on its rates)")
      ->capture_default_str();
  app.add_option("--max-error", max_error,
                 "fail (exit 1) if any mode's predicted step peak is off the measured by more than this fraction "
                 "(0: report only)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-broadcast-error", max_broadcast_error,
                 "fail (exit 1) if the broadcast form's predicted fwd+bwd peak is off the measured by more than this "
                 "fraction (0: report only)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  runtime::set_compute_threads(1);
  try {
    if (rows % seq_len != 0)
      throw InputError("measure_two_linear", fmt::format("{} rows", rows), "--rows", "a multiple of --seq-len");
    const int64_t n = world.size();
    const auto desc = two_linear(hidden, ffn, seq_len);
    auto topology = topo::load_topology(topology_name);
    // Memory does not depend on the rates: N ranks that do not fill the topology's nodes
    // (9 on Perlmutter's 4 per node, for 2d's q = 3) are one node of N.
    if (n > topology.gpus_per_node && n % topology.gpus_per_node != 0) topology.gpus_per_node = n;
    if (topology.total_gpus() < n) topology.num_nodes = (n + topology.gpus_per_node - 1) / topology.gpus_per_node;
    planner::PlannerOptions po;
    po.gpus = n;
    po.batch_seqs = rows / seq_len;
    po.precision = plan::Precision::fp32();  // the runtime's dtype on CPU
    po.memory_limit = false;
    po.activation_checkpointing = false;  // no blocks to recompute: every activation is kept

    std::vector<tools::ModeGrid> modes = tools::colossal_mode_grids(n, "measure_two_linear");
    planner::select_tensor_modes(po, "axonn3d", "measure_two_linear");
    for (const auto& e : planner::rank_candidates(desc, topology, po).feasible)
      if (e.grid.gdata == 1 && e.grid.ginter == 1 && planner::tensor_mode_name(e.grid) == "axonn3d") {
        modes.push_back({"axonn3d", e.grid});
        break;
      }

    auto gen = at::detail::createCPUGenerator(7);
    const at::Tensor w1 = at::randn({hidden, ffn}, gen) * (1.0 / std::sqrt(hidden));
    const at::Tensor w2 = at::randn({ffn, hidden}, gen) * (1.0 / std::sqrt(ffn));
    const at::Tensor batch = at::randint(0, 256, {rows / seq_len, seq_len + 1}, gen);
    runtime::DeviceMemory::install();
    if (world.rank() == 0)
      fmt::print("measure_two_linear: fc1 {} x {}, fc2 {} x {}, {} rows ({} sequences of {}), fp32, {} ranks; MiB, the "
                 "most of any rank\n\n"
                 "| mode | grid | fwd+bwd peak | vs 1d | step peak | predicted | predicted / measured | model state, "
                 "measured / predicted |\n|---|---|---|---|---|---|---|---|\n",
                 hidden, ffn, ffn, hidden, rows, rows / seq_len, seq_len, n);
    double fwd_bwd_1d = 0;
    std::vector<std::string> off;  // modes predicted past --max-error (--max-broadcast-error)
    // Notes `mode` in `off` when its prediction is more than `tolerance` (> 0) off the measured.
    auto check = [&off](const std::string& mode, double predicted, double measured, double tolerance) {
      if (tolerance > 0 && std::abs(predicted / measured - 1) > tolerance)
        off.push_back(fmt::format("{} ({:.4f})", mode, predicted / measured));
    };
    std::vector<std::pair<std::string, plan::Plan>> summa_plans;  // the 2d-layout ones, for the broadcast form
    for (const tools::ModeGrid& m : modes) {
      const planner::Evaluation e = planner::evaluate(desc, topology, m.grid, po);
      if (!e.feasible) {
        if (world.rank() == 0) fmt::print("| {} | {} | not feasible: {} |\n", m.name, m.grid.to_string(), e.rejected_because);
        continue;
      }
      const plan::Plan p = planner::make_plan(desc, topology, po, e, 1, 1);
      if (p.grid.layout == topo::TensorLayout::TwoD) summa_plans.emplace_back(m.name, p);
      double fwd_bwd = 0, step = 0, state = 0;
      {
        runtime::ProcessGrid pg(world, p.grid, p.placement_order);
        runtime::StageEngine engine(pg, schedule::build_schedule(p, pg.coord(topo::Axis::Pipe)), nullptr);
        TwoLinear model(pg, engine.engine(), engine.schedule(), hidden, ffn, w1, w2);
        runtime::Trainer trainer(pg, model, engine, {});
        runtime::DeviceMemory::empty_cache();
        runtime::DeviceMemory::reset_peak();
        trainer.gradients(batch);
        fwd_bwd = tools::max_over_ranks(world, static_cast<double>(runtime::DeviceMemory::peak_bytes()));
        trainer.step(batch);  // Adam's moments appear
        state = tools::max_over_ranks(world, static_cast<double>(runtime::DeviceMemory::live_bytes()));
        runtime::DeviceMemory::reset_peak();
        trainer.step(batch);
        step = tools::max_over_ranks(world, static_cast<double>(runtime::DeviceMemory::peak_bytes()));
      }
      if (m.name == "1d") fwd_bwd_1d = fwd_bwd;
      check(m.name, e.memory.total_bytes(), step, max_error);
      if (world.rank() == 0)
        fmt::print("| {} | {} | {:.2f} | {:.3f} | {:.2f} | {:.2f} | {:.3f} | {:.2f} / {:.2f} |\n", m.name,
                   m.grid.to_string(), fwd_bwd / kBytesPerMiB, fwd_bwd / fwd_bwd_1d, step / kBytesPerMiB,
                   e.memory.total_bytes() / kBytesPerMiB, e.memory.total_bytes() / step, state / kBytesPerMiB,
                   e.memory.model_state_bytes / kBytesPerMiB);
    }
    if (world.rank() == 0 && !summa_plans.empty())
      fmt::print("\nSUMMA's broadcast form (runtime::summa_linear) on the same grids:\n\n"
                 "| mode | grid | fwd+bwd peak | vs 1d | predicted | predicted / measured | measured - predicted "
                 "(bytes) |\n|---|---|---|---|---|---|---|\n");
    for (const auto& [name, p] : summa_plans) {
      const double predicted = planner::summa_broadcast_peak_bytes(desc, p.grid, rows, static_cast<double>(w1.element_size()));
      const double measured = broadcast_fwd_bwd_peak(world, p, w1, w2, rows);
      const std::string mode = name + " broadcast";
      check(mode, predicted, measured, max_broadcast_error);
      if (world.rank() == 0)
        fmt::print("| {} | {} | {:.2f} | {:.3f} | {:.2f} | {:.3f} | {:.0f} |\n", mode, p.grid.to_string(),
                   measured / kBytesPerMiB, measured / fwd_bwd_1d, predicted / kBytesPerMiB, predicted / measured,
                   measured - predicted);
    }
    if (!off.empty()) {
      if (world.rank() == 0)
        fmt::print(stderr, "measure_two_linear: predicted / measured peak beyond 1 +- {} (step) or {} (fwd+bwd): {}\n",
                   max_error, max_broadcast_error, fmt::join(off, ", "));
      return 1;
    }
  } catch (const Error& e) {
    runtime::abort_job(e.what(), exit_code(e));
  } catch (const std::exception& e) {
    runtime::abort_job(e.what(), kExitInternal);
  }
  return 0;
}
