// The axplan command line; see axplan_cli.hpp.
#include "axplan_cli.hpp"

#include <algorithm>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)
#include <fmt/ostream.h>

#include "axonn/common/atomic_write.hpp"
#include "axonn/common/clock.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/median.hpp"
#include "axonn/common/units.hpp"
#include "axonn/plan/plan.hpp"
#include "axonn/plan/tensor_mode.hpp"
#include "axonn/planner/calibration_pool.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/topology/topology_io.hpp"
#include "report.hpp"
#include "fit_matmul.hpp"
#include "fit_published.hpp"
#include "compare_sweeps.hpp"
#include "residuals.hpp"
#include "calibration_swap.hpp"
#include "validate.hpp"

namespace axonn::tools {
namespace {

// --tensor-mode's choices and help, from the registry (plan/tensor_mode.hpp) and "all".
std::vector<std::string> tensor_mode_choices() {
  std::vector<std::string> names;
  for (const auto& m : plan::tensor_modes()) names.push_back(m.name);
  names.push_back("all");
  return names;
}
std::string tensor_mode_help() {
  std::string help = "the 4D grids' tensor parallelism: ";
  for (const auto& m : plan::tensor_modes()) help += fmt::format("{} ({}), ", m.name, m.help);
  return help + "or all (every mode, ranked together)";
}

// Options shared by `rank` and `plan`.
struct CommonArgs {
  std::string model = "gpt-20b";
  std::string topology = "perlmutter";
  int64_t gpus = 0;
  int64_t batch_tokens = -1;  // -1: not given
  int64_t batch_seqs = -1;
  int64_t microbatch_seqs = 0;
  bool placement_agnostic = false;
  std::string comm_model = "full";
  bool no_memory_limit = false;
  bool no_checkpointing = false;
  int64_t cache_layers = 0;
  int overlap_level = 4;  // plan::OverlapSettings::level (with cache_layers)
  std::string order = "x,y,z,pipe,data";
  bool search_order = false;
  std::string precision = "bf16";
  std::string grad_precision = "fp32";
  std::string pipeline_schedule = "message-driven";
  int64_t pipeline_limit = 0;
  std::string stage_units;                // "3,3,2"; empty: balanced by predicted time
  std::string checkpoint_interval = "1";  // N or "axonn"
  bool offload_optimizer = false;
  int64_t bucket_elements = plan::OptimizerSettings{}.bucket_elements;
  int64_t allreduce_coarsening = plan::OptimizerSettings{}.allreduce_coarsening;
  int64_t zero = 0;
  bool search_memory_options = false;
  std::string strategy = "4d";
  std::string tensor_mode = "axonn3d";
  int64_t tensor_depth = 1;  // 2.5d
  int64_t l2l_microbatches = 0;  // 0: searched
  std::string l2l_stash;         // empty: searched
  bool l2l_no_prefetch = false;
};

void add_common(CLI::App* app, CommonArgs& a) {
  app->add_option("--model", a.model, "model description: a shipped name (model_zoo/models) or a JSON path")
      ->capture_default_str();
  app->add_option("--topology", a.topology, "cluster: a shipped name (topology/clusters) or a JSON path")
      ->capture_default_str();
  app->add_option("--gpus", a.gpus, "number of GPUs")->required();
  auto* tokens = app->add_option("--batch-tokens", a.batch_tokens, "global batch in tokens (a multiple of seq_len)");
  auto* seqs = app->add_option("--batch-seqs", a.batch_seqs, "global batch in sequences");
  tokens->excludes(seqs);
  app->add_option("--microbatch-seqs", a.microbatch_seqs,
                  "sequences per micro-batch per data-parallel group (default: docs/model.md rule)");
  app->add_flag("--placement-agnostic", a.placement_agnostic, "one bandwidth for every group (no eq. 10)");
  app->add_option("--comm-model", a.comm_model, "paper: the 4D paper's fixed model; full: every layer")
      ->check(CLI::IsMember({"paper", "full"}))
      ->capture_default_str();
  app->add_flag("--no-memory-limit", a.no_memory_limit, "keep candidates that exceed GPU memory");
  app->add_flag("--no-checkpointing", a.no_checkpointing, "no activation checkpointing (full model)");
  app->add_option("--cache-layers", a.cache_layers, "overlap optimization 4: layers whose gathered weight is kept")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--overlap-level", a.overlap_level,
                  "overlap switches of the plan and its prediction: 0 none .. 4 all four optimizations (axrun's levels)")
      ->check(CLI::Range(0, 4))
      ->capture_default_str();
  app->add_option("--order", a.order, "placement order of the groups, innermost first")->capture_default_str();
  app->add_flag("--search-order", a.search_order,
                "also try every other order of each grid's groups of 2 or more (innermost first) and keep the "
                "fastest; --order is tried first and kept on ties");
  app->add_option("--pipeline-schedule", a.pipeline_schedule, "pipeline schedule (Ginter > 1)")
      ->check(CLI::IsMember({"message-driven", "1f1b", "gpipe"}))
      ->capture_default_str();
  app->add_option("--pipeline-limit", a.pipeline_limit,
                  "message-driven: micro-batches in flight (default: Ginter)")
      ->check(CLI::PositiveNumber);
  app->add_option("--stage-units", a.stage_units,
                  "pipeline units (blocks) per stage, e.g. 3,3,2 (default: balanced by predicted time)");
  app->add_option("--checkpoint-interval", a.checkpoint_interval,
                  "blocks recomputed together: N, or axonn (the factor of the blocks per stage closest to sqrt(blocks))")
      ->capture_default_str();
  app->add_option("--precision", a.precision,
                  "bf16: mixed precision (bf16 weights and activations, fp32 master and Adam); fp32: everything fp32")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  app->add_option("--grad-precision", a.grad_precision,
                  "with bf16: the gradients and their data-parallel all-reduce in fp32 (Megatron-LM, 18 bytes per "
                  "parameter) or bf16 (AxoNN 2022, 16)")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  app->add_flag("--offload-optimizer", a.offload_optimizer,
                "AxoNN's offloaded optimizer: fp32 master weights and Adam state in host memory, updated in buckets");
  app->add_option("--bucket-elements", a.bucket_elements, "offload: elements per optimizer bucket (bsize)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--allreduce-coarsening", a.allreduce_coarsening,
                  "offload: buckets per data-parallel all-reduce chunk (k), overlapped with the optimizer; 0: none")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--zero", a.zero,
                  "ZeRO stage over the data-parallel group: 1 shards Adam's state (and the offloaded master), "
                  "2 the weight gradients too, 3 the weights too (gathered at each fetch; pipelines need 1f1b or "
                  "gpipe)")
      ->check(CLI::Range(int64_t{0}, plan::OptimizerSettings::kMaxZeroStage))
      ->capture_default_str();
  app->add_flag("--search-memory-options", a.search_memory_options,
                "also try each grid with the optimizer offloaded, ZeRO-1, ZeRO-2 and ZeRO-3, each ZeRO alone and offloaded "
                "(the bucket size and coarsening above), and keep the fastest that fits");
  app->add_option("--strategy", a.strategy,
                  "4d: tensor x pipeline x data grids; l2l: layer-to-layer (seed 001, data parallelism, the model "
                  "relayed through the device unit by unit); all: both, ranked together")
      ->check(CLI::IsMember({"4d", "l2l", "all"}))
      ->capture_default_str();
  app->add_option("--tensor-mode", a.tensor_mode, tensor_mode_help())
      ->check(CLI::IsMember(tensor_mode_choices()))
      ->capture_default_str();
  app->add_option("--tensor-depth", a.tensor_depth, "2.5d: the depth d (layers of the q x q grid)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--l2l-microbatches", a.l2l_microbatches,
                  "l2l: micro-batches per unit visit, u (default: every u dividing a replica's sequences)")
      ->check(CLI::PositiveNumber);
  app->add_option("--l2l-stash", a.l2l_stash, "l2l: where the units' outputs wait for the backward (default: both)")
      ->check(CLI::IsMember({"host", "device"}));
  app->add_flag("--l2l-no-prefetch", a.l2l_no_prefetch, "l2l: copy each unit's weights when it is fetched, not before");
}

struct Loaded {
  model::ModelDescription model;
  topo::Topology topology;
  planner::PlannerOptions options;
};

Loaded load(const CommonArgs& a) {
  Loaded l{model::load_model(a.model), topo::load_topology(a.topology), {}};
  auto& o = l.options;
  o.gpus = a.gpus;
  if (a.batch_tokens == -1 && a.batch_seqs == -1)
    throw InputError("axplan", "no batch size given", "--batch-tokens / --batch-seqs", "one of them");
  if (a.batch_tokens != -1) {
    if (a.batch_tokens <= 0 || a.batch_tokens % l.model.seq_len != 0)
      throw InputError("axplan", fmt::format("batch of {} tokens", a.batch_tokens), "--batch-tokens",
                  fmt::format("a positive multiple of the model's seq_len = {}", l.model.seq_len));
    o.batch_seqs = a.batch_tokens / l.model.seq_len;
  } else {
    o.batch_seqs = a.batch_seqs;
  }
  o.comm_model = a.comm_model == "paper" ? planner::CommModel::Paper : planner::CommModel::Full;
  o.placement_aware = !a.placement_agnostic;
  o.memory_limit = !a.no_memory_limit;
  o.order = topo::parse_order(a.order, "axplan", "--order");
  o.search_order = a.search_order;
  if (o.search_order && !o.placement_aware)
    throw InputError("axplan", "--search-order with --placement-agnostic", "--search-order",
                     "the placement-aware model (the agnostic one gives every order the same time)");
  o.microbatch_seqs = a.microbatch_seqs;
  o.activation_checkpointing = !a.no_checkpointing;
  o.overlap = plan::OverlapSettings::level(a.overlap_level, a.cache_layers);
  o.pipeline_schedule = plan::parse_pipeline_schedule(a.pipeline_schedule, "axplan", "--pipeline-schedule");
  o.pipeline_limit = a.pipeline_limit;
  if (!a.stage_units.empty()) {
    std::stringstream ss(a.stage_units);
    for (std::string item; std::getline(ss, item, ',');) {
      try {
        size_t used = 0;
        const long long u = std::stoll(item, &used);
        if (used != item.size() || u < 1) throw std::invalid_argument(item);
        o.stage_units.push_back(u);
      } catch (const std::exception&) {
        throw InputError("axplan", "bad stage size \"" + item + "\"", "--stage-units " + a.stage_units,
                         "positive integers, one per stage, summing to the model's pipeline units");
      }
    }
  }
  if (a.checkpoint_interval == "axonn") {
    o.checkpoint_interval = 0;
  } else {
    try {
      size_t used = 0;
      o.checkpoint_interval = std::stoll(a.checkpoint_interval, &used);
      if (used != a.checkpoint_interval.size() || o.checkpoint_interval < 1) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw InputError("axplan", "bad checkpoint interval \"" + a.checkpoint_interval + "\"",
                       "--checkpoint-interval", "a positive integer or axonn");
    }
  }
  if (a.precision == "fp32" && a.grad_precision == "bf16")
    throw InputError("axplan", "--grad-precision bf16 with --precision fp32", "--grad-precision",
                     "fp32 gradients for fp32 weights (bf16 gradients need --precision bf16)");
  if (a.precision == "fp32") o.precision = plan::Precision::fp32();
  else o.precision = a.grad_precision == "bf16" ? plan::Precision::bf16_gradients() : plan::Precision::bf16();
  o.optimizer.offload = a.offload_optimizer;
  o.optimizer.bucket_elements = a.bucket_elements;
  o.optimizer.allreduce_coarsening = a.allreduce_coarsening;
  o.optimizer.zero = a.zero;
  o.search_memory_options = a.search_memory_options;
  o.rank_4d = a.strategy != "l2l";
  o.rank_l2l = a.strategy != "4d";
  planner::select_tensor_modes(o, a.tensor_mode, "--tensor-mode");
  const bool all_modes = a.tensor_mode == "all";
  if (a.tensor_depth > 1 && (all_modes || !plan::find_tensor_mode(a.tensor_mode, "axplan", "--tensor-mode").takes_depth))
    throw InputError("axplan", "--tensor-depth " + std::to_string(a.tensor_depth) + " with --tensor-mode " + a.tensor_mode,
                     "--tensor-depth", "--tensor-mode 2.5d or 2d-broadcast (the depth of Tesseract's layers)");
  if (o.comm_model == planner::CommModel::Paper &&
      std::any_of(o.tensor_modes.begin(), o.tensor_modes.end(), [](const std::string& m) {
        return !plan::find_tensor_mode(m, "axplan", "--tensor-mode").paper_model;
      }))
    throw InputError("axplan", "--tensor-mode " + a.tensor_mode + " with --comm-model paper", "--tensor-mode",
                     "axonn3d or 1d with the paper model (the 4D paper's model has no sequence parallelism, 2d or 3d)");
  o.l2l_microbatches = a.l2l_microbatches;
  if (!a.l2l_stash.empty()) o.l2l_stash = a.l2l_stash == "device" ? plan::StashTier::Device : plan::StashTier::Host;
  o.l2l_prefetch = !a.l2l_no_prefetch;
  if (o.rank_l2l && o.comm_model == planner::CommModel::Paper)
    throw InputError("axplan", "--strategy " + a.strategy + " with --comm-model paper", "--strategy",
                     "4d with the paper model (it costs communication only; L2L needs the full model)");
  return l;
}

ReportContext context(const Loaded& l) {
  ReportContext c;
  c.model = l.model.name;
  c.topology = l.topology.name;
  c.gpus = l.options.gpus;
  c.batch_seqs = l.options.batch_seqs;
  c.seq_len = l.model.seq_len;
  c.comm_model = l.options.comm_model;
  c.placement_aware = l.options.placement_aware;
  c.order = topo::order_to_string(l.options.order);
  c.pipeline_schedule = l.options.pipeline_schedule;
  c.memory_options_searched = l.options.search_memory_options;
  c.order_searched = l.options.search_order;
  c.bf16_kernels = &l.topology.compute_for(l.options.precision.compute_bytes) != &l.topology.compute;
  // A strategy column where the ranking mixes kinds: L2L, or a mode whose grids the five
  // fields do not name (its registry entry has a tag).
  c.strategies_ranked =
      l.options.rank_l2l ||
      std::any_of(l.options.tensor_modes.begin(), l.options.tensor_modes.end(), [](const std::string& m) {
        return plan::find_tensor_mode(m, "axplan", "--tensor-mode").tag != nullptr;
      });
  return c;
}

planner::Ranking rank_or_throw(const Loaded& l) {
  planner::Ranking r = planner::rank_candidates(l.model, l.topology, l.options);
  if (r.feasible.empty())
    throw InputError("planner", "no feasible candidate: " + planner::explain_infeasible(r, l.topology),
                fmt::format("{} on {} GPUs of {}", l.model.name, l.options.gpus, l.topology.name),
                "more GPUs, a smaller batch or model, or --no-memory-limit / --show-rejected to inspect");
  return r;
}

// --grid for `gpus` GPUs (topo::parse_grid, whose product must be the GPU count); with
// --tensor-mode sequence, 1d, 2d or 2.5d "t,gdata,ginter" (or "t,gdata"; topo::parse_group_grid,
// with the 2.5d depth).
topo::Grid parse_grid(const std::string& text, int64_t gpus, const std::string& tensor_mode, int64_t depth) {
  const std::string where = "--grid " + text;
  const plan::TensorMode* mode =  // all: AxoNN's five fields (explain)
      tensor_mode == "all" ? nullptr : &plan::find_tensor_mode(tensor_mode, "axplan", "--tensor-mode");
  const std::optional<topo::GroupMode> group = mode ? mode->group_grid : std::nullopt;
  topo::Grid g = group ? topo::parse_group_grid(*group, text, "axplan", where, depth) : topo::parse_grid(text, "axplan", where);
  if (mode && mode->grid_layout) g.layout = *mode->grid_layout;
  if (g.total() != gpus)
    throw InputError("axplan", fmt::format("grid product {} differs from the GPU count", g.total()), "--grid " + text,
                     fmt::format("{} whose product is {}", group ? "t,gdata,ginter" : "gx,gy,gz,gdata,ginter", gpus));
  return g;
}

int cmd_rank(const CommonArgs& a, const std::string& format, size_t top, bool show_rejected, std::ostream& out) {
  Loaded l = load(a);
  planner::Ranking r = show_rejected ? planner::rank_candidates(l.model, l.topology, l.options) : rank_or_throw(l);
  Format f = format == "json" ? Format::Json : format == "csv" ? Format::Csv : Format::Table;
  print_ranking(out, f, context(l), r, top, show_rejected);
  return 0;
}

int cmd_plan(const CommonArgs& a, const std::string& grid_text, const std::string& output, bool any_model,
             std::ostream& out) {
  Loaded l = load(a);
  if (!grid_text.empty() && a.strategy == "l2l")
    throw InputError("axplan", "--grid with --strategy l2l", "--grid " + grid_text,
                     "no --grid: L2L runs data parallelism over every GPU (1,1,1,gpus,1)");
  std::optional<topo::Grid> wanted;  // parsed first: a bad --grid is named before the ranking
  if (!grid_text.empty()) {
    if (a.tensor_mode == "all")
      throw InputError("axplan", "--grid with --tensor-mode all", "--grid " + grid_text,
                       "--tensor-mode axonn3d (gx,gy,gz,gdata,ginter), 1d, sequence, 2d, 2d-broadcast, 2.5d or 3d "
                       "(t,gdata,ginter) with --grid");
    wanted = parse_grid(grid_text, l.options.gpus, a.tensor_mode, a.tensor_depth);
  }
  // With --grid, a ranking without feasible candidates still names the grid's rejection.
  planner::Ranking r = wanted ? planner::rank_candidates(l.model, l.topology, l.options) : rank_or_throw(l);
  const planner::Evaluation* chosen = r.feasible.empty() ? nullptr : &r.feasible.front();
  if (wanted) {
    const topo::Grid& g = *wanted;
    auto it = std::find_if(r.feasible.begin(), r.feasible.end(),
                           [&](const auto& e) { return e.strategy == plan::Strategy::FourD && e.grid == g; });
    if (it == r.feasible.end()) {
      if (l.options.comm_model == planner::CommModel::Paper && g.ginter != 1)
        throw InputError("axplan", "the paper model has no pipeline", "--grid " + grid_text, "ginter = 1 with --comm-model paper");
      planner::Evaluation e = planner::evaluate(l.model, l.topology, g, l.options);
      if (e.feasible)  // e.g. t = 1 with --tensor-mode 1d: a grid of another mode
        throw InputError("axplan", "not a grid of --tensor-mode " + a.tensor_mode, "--grid " + grid_text,
                         fmt::format("a grid of that mode ({}); t = 1 is plain data parallelism: --tensor-mode "
                                     "axonn3d --grid 1,1,1,gdata,ginter",
                                     plan::find_tensor_mode(a.tensor_mode, "axplan", "--tensor-mode").help));
      throw InputError("axplan", "grid rejected: " + e.rejected_because, "--grid " + grid_text,
                  "a grid that divides the model and batch and fits GPU memory");
    }
    chosen = &*it;
  }
  plan::Plan p = planner::make_plan(l.model, l.topology, l.options, *chosen, (chosen - r.feasible.data()) + 1,
                                    static_cast<int64_t>(r.feasible.size()));
  if (auto why = plan::runtime_problem(p.model); why && !any_model)
    throw InputError("axplan", *why, "--model " + a.model,
                     "a model axrun can run, or --any-model to write the plan for another runtime");
  const plan::Prediction& pr = *p.prediction;
  plan::save_plan(p, output);
  fmt::print(out, "wrote {}: {} on {} GPUs of {}, grid {}, {} micro-batch(es) of {} sequences\n", output,
             l.model.name, p.gpus, l.topology.name, p.grid.to_string(), p.microbatches(), p.batch.microbatch_seqs);
  if (l.options.search_order)
    fmt::print(out, "placement order {} (searched; innermost first)\n", topo::order_to_string(p.placement_order));
  if (p.strategy == plan::Strategy::L2L)
    fmt::print(out, "strategy l2l: the model relayed through each device unit by unit, {} micro-batch(es) per visit, "
                    "stash on the {}, prefetch {}; host tier {:.2f} GiB per GPU\n",
               p.microbatches(), plan::stash_tier_name(p.l2l.stash), p.l2l.prefetch ? "on" : "off",
               static_cast<double>(pr.host_memory_bytes_per_gpu) / kBytesPerGiB);
  if (p.grid.ginter > 1)
    fmt::print(out, "pipeline {} (limit {}), units per stage {}, checkpoint interval {} block(s)\n",
               plan::pipeline_schedule_name(p.pipeline.schedule), p.pipeline_limit(), fmt::join(p.stage_units(), ","),
               p.checkpoint_interval);
  if (pr.batch_s > 0)
    fmt::print(out, "predicted batch time {:.4f} s per step: compute {:.4f} s, exposed communication {:.4f} s\n",
               pr.batch_s, pr.compute_s, pr.exposed_comm_s);
  fmt::print(out, "predicted communication {:.4f} s per step (rank {} of {}), memory {:.2f} GiB per GPU\n", pr.comm_s,
             pr.rank, pr.candidates_ranked, static_cast<double>(pr.memory_bytes_per_gpu) / kBytesPerGiB);
  if (p.optimizer.reduces_data_parallel() || l.options.search_memory_options)
    fmt::print(out, "optimizer: {}{}\n", plan::optimizer_label(p.optimizer),
               l.options.search_memory_options ? " (the best of the memory options searched for this grid)" : "");
  return 0;
}

int cmd_explain(const CommonArgs& a, const std::string& grid_text, std::ostream& out) {
  Loaded l = load(a);
  planner::check_request(l.model, l.topology, l.options);
  const topo::Grid g = parse_grid(grid_text, l.options.gpus, a.tensor_mode, a.tensor_depth);
  print_explanation(out, context(l), planner::explain(l.model, l.topology, g, l.options));
  return 0;
}

// A positional list of two or more existing files (residuals, pool-calibrations).
void add_two_or_more_files(CLI::App* command, const std::string& name, std::vector<std::string>& files,
                           const std::string& help) {
  command->add_option(name, files, help)->required()->expected(2, -1)->check(CLI::ExistingFile);
}

// axplan pool-calibrations: the files read, planner::pooled_calibration, one file written.
int cmd_pool_calibrations(const std::vector<std::string>& inputs, const std::string& output, const std::string& name,
                          std::ostream& out) {
  std::vector<topo::Topology> calibrations;
  for (const std::string& path : inputs) calibrations.push_back(topo::load_topology(path));
  const topo::Topology pooled = planner::pooled_calibration(calibrations, inputs, name);
  write_file_atomically(output, topo::topology_to_json(pooled).dump(2) + "\n", "pool-calibrations");
  fmt::print(out, "pooled {} calibrations into {}: {} matmul shapes, {} intra-node groups, sync wait of {} group sizes\n",
             inputs.size(), output, pooled.compute.matmul_table.size(), pooled.intra_node_table.size(),
             pooled.sync_wait.size());
  return 0;
}

int cmd_bench(const std::string& model, const std::string& topology, int64_t gpus, int64_t batch_seqs, int repeat,
              int64_t threads, std::ostream& out) {
  Loaded l{model::load_model(model), topo::load_topology(topology), {}};
  l.options.gpus = gpus;
  l.options.batch_seqs = batch_seqs;
  l.options.threads = threads;
  std::vector<double> seconds;
  size_t candidates = 0, feasible = 0;
  for (int i = 0; i < repeat; ++i) {
    const double t0 = now_s();
    planner::Ranking r = planner::rank_candidates(l.model, l.topology, l.options);
    seconds.push_back(now_s() - t0);
    candidates = r.feasible.size() + r.rejected.size();
    feasible = r.feasible.size();
  }
  const double median_s = median(seconds);
  fmt::print(out, "axplan bench: {} ({} layers) on {} GPUs of {}, batch {} sequences\n", l.model.name,
             l.model.layers.size(), gpus, l.topology.name, batch_seqs);
  fmt::print(out, "candidates: {} enumerated, {} feasible\n", candidates, feasible);
  fmt::print(out, "rank time: median {:.3f} ms over {} runs (min {:.3f} ms)\n", median_s * 1e3, repeat,
             *std::min_element(seconds.begin(), seconds.end()) * 1e3);
  fmt::print(out, "throughput: {:.0f} candidates evaluated per second ({:.2f} us per candidate)\n",
             static_cast<double>(candidates) / median_s, median_s / static_cast<double>(candidates) * 1e6);
  return 0;
}

}  // namespace

int run_axplan(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
               const ProgramRunner& run_program) {
  CLI::App app{"axplan: rank 4D (3D tensor x data) + pipeline grids for a model on a cluster and write plans"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "axplan 0.1.0");

  CommonArgs rank_args, plan_args;
  std::string format = "table";
  size_t top = 10;
  bool show_rejected = false;
  auto* rank = app.add_subcommand("rank", "rank every grid by predicted batch time (paper model: communication time)");
  add_common(rank, rank_args);
  rank->add_option("--top", top, "how many candidates to show (0 = all)")->capture_default_str();
  rank->add_option("--format", format, "output format")->check(CLI::IsMember({"table", "json", "csv"}))->capture_default_str();
  rank->add_flag("--show-rejected", show_rejected, "also list rejected grids with the reason");

  std::string grid, output = "plan.json";
  auto* plan = app.add_subcommand("plan", "write the plan JSON of the best (or a given) grid");
  add_common(plan, plan_args);
  plan->add_option("--grid", grid,
                   "gx,gy,gz,gdata,ginter, or t,gdata,ginter with --tensor-mode 1d, sequence, 2d, 2.5d or 3d (default: the best ranked)");
  plan->add_option("--output,-o", output, "plan file to write")->capture_default_str();
  bool any_model = false;
  plan->add_flag("--any-model", any_model, "write the plan even for a model axrun cannot run (for another runtime)");

  std::string bench_model = "gpt-80b", bench_topology = "frontier";
  int64_t bench_gpus = 16384, bench_batch = 8192;
  int bench_repeat = 5;
  int64_t bench_threads = 0;
  auto* bench = app.add_subcommand("bench", "measure how many candidates the planner evaluates per second");
  bench->add_option("--model", bench_model, "model")->capture_default_str();
  bench->add_option("--topology", bench_topology, "cluster")->capture_default_str();
  bench->add_option("--gpus", bench_gpus, "GPU count")->capture_default_str()->check(CLI::PositiveNumber);
  bench->add_option("--batch-seqs", bench_batch, "global batch in sequences")->capture_default_str()->check(CLI::PositiveNumber);
  bench->add_option("--repeat", bench_repeat, "runs to take the median of")->capture_default_str()->check(CLI::PositiveNumber);
  bench->add_option("--threads", bench_threads, "threads evaluating candidates (0 = one per core)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);

  CommonArgs explain_args;
  std::string explain_grid;
  auto* explain = app.add_subcommand("explain", "one grid in detail: bandwidths, per-layer costs, memory, verdict");
  add_common(explain, explain_args);
  explain->add_option("--grid", explain_grid, "gx,gy,gz,gdata,ginter (t,gdata,ginter with --tensor-mode 1d, sequence, 2d, 2.5d or 3d)")
      ->required();

  auto* calibrate = app.add_subcommand(
      "calibrate", "measure a cluster under mpirun and write a topology file (runs axplan-calibrate; "
                   "'axplan calibrate --help' lists its options)");
  calibrate->prefix_command();
  calibrate->set_help_flag();

  ValidateOptions val;
  auto* validate = app.add_subcommand(
      "validate", "run configurations on a cluster with axrun and compare measured with predicted batch times");
  auto* val_model = validate->add_option("--model", val.model, "model")->capture_default_str();
  validate->add_option("--topology", val.topology, "the cluster's topology file (axplan calibrate)")->required();
  auto* val_gpus = validate->add_option("--gpus", val.gpus, "GPUs (ranks) of the cluster")->check(CLI::PositiveNumber);
  auto* val_batch =
      validate->add_option("--batch-seqs", val.batch_seqs, "global batch in sequences")->check(CLI::PositiveNumber);
  auto* val_launcher = validate->add_option(
      "--launcher", val.launcher,
      "command prefix that starts an MPI job of --gpus ranks, e.g. \"mpirun -np 8\" or "
      "\"bash tools/emulated_cluster.sh --nodes 2 --gpus-per-node 4 --rate 400mbit --\"");
  auto* val_axrun = validate->add_option("--axrun", val.axrun, "the runtime program (default: axrun next to axplan)");
  auto* val_axrun_args =
      validate->add_option("--axrun-args", val.axrun_args, "extra axrun arguments, e.g. \"--progress poll\"");
  auto* val_overlap =
      validate->add_option("--overlap-level", val.overlap_level, "overlap switches of the plans run and predicted (0-4)")
          ->capture_default_str()
          ->check(CLI::Range(0, 4));
  auto* val_precision =
      validate->add_option("--precision", val.precision,
                           "the plans' dtype: fp32, or bf16 (mixed precision, predicted with the topology's compute_bf16)")
          ->capture_default_str()
          ->check(CLI::IsMember({"fp32", "bf16"}));
  auto* val_search = validate->add_flag("--search-order", val.search_order,
                     "run each configuration in the placement order the search finds for it (as rank --search-order)");
  auto* val_steps =
      validate->add_option("--steps", val.steps, "training steps per configuration")->capture_default_str();
  auto* val_repeats = validate->add_option("--repeats", val.repeats,
                       "runs of each configuration, in rounds (measured = the median of the runs; the run-to-run "
                       "spread is reported beside the MAPE)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  auto* val_probes = validate->add_flag("--kernel-probes", val.kernel_probes,
                       "time the model's kernels again before the sweep and after each round (axplan calibrate "
                       "--kernels-only through the launcher) and report them over the topology's: how far the "
                       "machine's rate moved since it was calibrated");
  auto* val_modes = validate->add_option("--tensor-mode", val.tensor_mode,
                       "the tensor modes ranked and run (as for rank; all: every mode, with --top per mode)")
      ->check(CLI::IsMember(tensor_mode_choices()))
      ->capture_default_str();
  validate->add_option("--top", val.top,
                       "run only the aware model's top K (0 = every runnable one; with --tensor-mode all, of each mode)")
      ->capture_default_str();
  validate->add_option("--sample", val.sample, "with --top: this many other configurations at random")->capture_default_str();
  validate->add_option("--seed", val.seed, "seed of --sample")->capture_default_str();
  validate->add_option("--timeout", val.timeout_s, "seconds per configuration")->capture_default_str()->check(CLI::Range(1.0, 1e9));
  validate->add_option("--out-dir", val.out_dir, "report directory")->capture_default_str();
  validate->add_option("--retries", val.retries, "runs again after a failure")->capture_default_str()->check(CLI::NonNegativeNumber);
  validate
      ->add_option("--rescore", val.rescore,
                   "score an earlier report.json's measurements under --topology; nothing is run, and the report's "
                   "model, cluster size, batch, steps, overlap level and tensor modes are used")
      ->check(CLI::ExistingFile)
      ->excludes(val_gpus)
      ->excludes(val_batch)
      ->excludes(val_launcher)
      ->excludes(val_axrun)
      ->excludes(val_axrun_args)
      ->excludes(val_overlap)
      ->excludes(val_model)
      ->excludes(val_steps)
      ->excludes(val_repeats)
      ->excludes(val_modes)
      ->excludes(val_search)
      ->excludes(val_precision)
      ->excludes(val_probes);

  std::string sweep_a, sweep_b;
  auto* compare_sweeps = app.add_subcommand(
      "compare-sweeps",
      "score one validate sweep's measured times as the prediction of another's (the same sweep run twice): the "
      "agreement a model as good as a rerun would show, and each sweep's scatter ceiling");
  compare_sweeps->add_option("A", sweep_a, "the first sweep's report.json (taken as the prediction)")
      ->required()
      ->check(CLI::ExistingFile);
  compare_sweeps->add_option("B", sweep_b, "the second sweep's report.json (taken as the measurement)")
      ->required()
      ->check(CLI::ExistingFile);

  std::vector<std::string> residual_reports;
  auto* residuals = app.add_subcommand(
      "residuals",
      "the model's error that several validate sweeps of one cluster share: each sweep's scale taken out, every "
      "configuration's systematic residual beside its noise, and the residual by pipeline stages, data-parallel "
      "ranks and tensor mode (score today's model by rescoring each report first)");
  add_two_or_more_files(residuals, "reports", residual_reports, "two or more sweeps' report.json, of the same cluster");

  std::string swap_report, swap_topology, swap_donor;
  auto* swap = app.add_subcommand(
      "calibration-swap",
      "which calibrated quantity moves a sweep's predictions: its measurements rescored under a calibration, then "
      "with each group of fields (matmuls, element-wise, sync wait, waiting share, bandwidths, latency) taken from "
      "another calibration of the same cluster, then under that one");
  swap->add_option("report", swap_report, "a validate sweep's report.json")->required()->check(CLI::ExistingFile);
  swap->add_option("--topology", swap_topology, "the calibration the sweep is scored under")
      ->required()
      ->check(CLI::ExistingFile);
  swap->add_option("--donor", swap_donor, "another calibration of the same cluster, whose fields are swapped in")
      ->required()
      ->check(CLI::ExistingFile);

  std::vector<std::string> pool_inputs;
  std::string pool_output, pool_name = "pooled";
  auto* pool = app.add_subcommand(
      "pool-calibrations",
      "pool several calibrations of one cluster (axplan calibrate's topology files) into one topology: every "
      "measured quantity the median of the calibrations that measured it");
  add_two_or_more_files(pool, "topologies", pool_inputs, "two or more topology files written by axplan calibrate");
  pool->add_option("-o,--output", pool_output, "the pooled topology file to write")->required();
  pool->add_option("--name", pool_name, "the pooled topology's name")->capture_default_str();

  FitPublishedOptions fitp;
  auto* fit_published = app.add_subcommand(
      "fit-published", "fit a GPU's compute model to published training runs and report the error on the runs left out");
  fit_published->add_option("--runs", fitp.runs, "runs file: a shipped name (model_zoo/published) or a JSON path")
      ->capture_default_str();
  fit_published->add_option("--topology", fitp.topology, "the cluster the runs ran on (default: the runs file's)");
  fit_published->add_option("--fit-rows", fitp.fit_rows, "1 to 3 rows (1-based) to fit on; the rest are held out")
      ->capture_default_str();
  fit_published->add_flag("--every-choice", fitp.every_choice,
                          "also fit on every choice of as many rows (the given one included) and summarize their "
                          "held-out errors");
  fit_published->add_option("--out", fitp.out, "write the topology with the fitted compute model to this file");

  MatmulShapesOptions shapes_o;
  auto* matmul_shapes = app.add_subcommand(
      "matmul-shapes", "list the local matmul shapes of published runs and models, for timing on a GPU "
                       "(tools/gpu_matmul_timings.py)");
  matmul_shapes->add_option("--runs", shapes_o.runs, "a published-runs file: each run's shapes at its own grid");
  matmul_shapes->add_option("--model", shapes_o.models, "a model (repeatable): its shapes on every grid of --gpus GPUs");
  matmul_shapes->add_option("--gpus", shapes_o.gpus, "GPU counts (comma-separated) whose grids the models use")
      ->capture_default_str()->delimiter(',')->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  matmul_shapes->add_option("--batch-seqs", shapes_o.batch_seqs, "global batch (sequences) of the models' grids")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  matmul_shapes->add_option("--out", shapes_o.out, "the shapes file to write (default: standard output)");

  FitMatmulOptions fitm;
  auto* fit_matmul = app.add_subcommand(
      "fit-matmul", "fit a GPU's matmul rate and overhead to products timed on it and report the error on the rest");
  fit_matmul->add_option("--timings", fitm.timings, "a timings file (tools/gpu_matmul_timings.py)")->required();
  fit_matmul->add_option("--topology", fitm.topology, "the cluster of that GPU (its peak and memory bandwidth)")
      ->capture_default_str();
  fit_matmul->add_option("--fit-groups", fitm.fit_groups, "the shape groups to fit on (default: all)")->delimiter(',');
  fit_matmul->add_option("--out", fitm.out, "write the topology with the fitted matmul model to this file");
  fit_matmul->add_option("--description", fitm.description, "the written topology's description");
  fit_matmul->add_flag("--with-elementwise", fitm.with_elementwise,
                       "write the timed element-wise operations' seconds per element (without it, --out writes none: the "
                       "roofline's bytes apply)");

  std::vector<const char*> argv;
  for (const auto& s : args) argv.push_back(s.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Success& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    err << "axplan: usage error: " << e.what() << "\n";
    err << "run 'axplan " << (app.get_subcommands().empty() ? "" : app.get_subcommands().front()->get_name() + " ")
        << "--help' for the options\n";
    return kExitUsage;
  }

  try {
    if (rank->parsed()) return cmd_rank(rank_args, format, top, show_rejected, out);
    if (plan->parsed()) return cmd_plan(plan_args, grid, output, any_model, out);
    if (explain->parsed()) return cmd_explain(explain_args, explain_grid, out);
    if (calibrate->parsed()) {
      if (!run_program)
        throw InputError("axplan", "calibrate runs as its own program", "axplan calibrate",
                         "the axplan program (not the in-process library call)");
      return run_program("axplan-calibrate", calibrate->remaining(), err);
    }
    if (validate->parsed()) return run_validate(val, out, err);
    if (compare_sweeps->parsed()) return run_compare_sweeps(sweep_a, sweep_b, out);
    if (residuals->parsed()) return run_residuals(residual_reports, out);
    if (swap->parsed()) return run_calibration_swap(swap_report, swap_topology, swap_donor, out);
    if (pool->parsed()) return cmd_pool_calibrations(pool_inputs, pool_output, pool_name, out);
    if (fit_published->parsed()) return run_fit_published(fitp, out);
    if (matmul_shapes->parsed()) return run_matmul_shapes(shapes_o, out);
    if (fit_matmul->parsed()) return run_fit_matmul(fitm, out);
    return cmd_bench(bench_model, bench_topology, bench_gpus, bench_batch, bench_repeat, bench_threads, out);
  } catch (const Error& e) {
    err << "axplan: " << e.what() << "\n";
    return exit_code(e);
  } catch (const std::exception& e) {
    err << "axplan: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace axonn::tools
