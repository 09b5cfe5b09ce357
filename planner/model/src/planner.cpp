// Enumeration, evaluation and ranking of grids; see axonn/planner/planner.hpp and
// docs/model.md.
#include "axonn/common/units.hpp"
#include "axonn/planner/planner.hpp"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "axonn/common/error.hpp"
#include "axonn/plan/tensor_mode.hpp"
#include "axonn/planner/l2l_model.hpp"
#include "evaluator.hpp"

namespace axonn::planner {

const char* comm_model_name(CommModel m) { return m == CommModel::Paper ? "paper" : "full"; }

namespace {

// Ordered factorizations of `remaining` into the factors f[depth..4]; `divisors`: those
// of the GPU count, ascending (every factor is one).
void enumerate_rec(int64_t remaining, const std::vector<int64_t>& divisors, std::array<int64_t, 5>& f, int depth,
                   std::vector<topo::Grid>& out) {
  if (depth == 4) {
    f[4] = remaining;
    out.push_back(topo::Grid{f[0], f[1], f[2], f[3], f[4]});
    return;
  }
  for (int64_t d : divisors) {
    if (d > remaining) break;
    if (remaining % d != 0) continue;
    f[depth] = d;
    enumerate_rec(remaining / d, divisors, f, depth + 1, out);
  }
}

}  // namespace

int64_t default_microbatch_seqs(int64_t per_group, int64_t gz, int64_t ginter) {
  if (ginter == 1) return per_group;
  // n micro-batches of per_group/n = gz*j sequences: n divides q = per_group/gz.
  if (per_group % gz != 0) return 0;
  const int64_t q = per_group / gz;
  for (int64_t n = ginter; n <= q; ++n)
    if (q % n == 0) return per_group / n;
  return 0;
}

std::vector<topo::Grid> enumerate_grids(int64_t gpus) {
  std::vector<topo::Grid> out;
  if (gpus < 1) return out;
  std::vector<int64_t> divisors;
  for (int64_t d = 1; d * d <= gpus; ++d)
    if (gpus % d == 0) divisors.push_back(d), divisors.push_back(gpus / d);
  std::sort(divisors.begin(), divisors.end());
  divisors.erase(std::unique(divisors.begin(), divisors.end()), divisors.end());
  out.reserve(4096);
  std::array<int64_t, 5> f{};
  enumerate_rec(gpus, divisors, f, 0, out);
  return out;
}

std::vector<topo::Grid> enumerate_mode_grids(const std::string& mode, int64_t gpus) {
  // A pointer: g++ 13's -Wdangling-reference takes a reference returned from a call with
  // temporary arguments for one into them (this one is the registry's entry).
  const plan::TensorMode* m = &plan::find_tensor_mode(mode, "planner", "tensor mode");
  std::vector<topo::Grid> out;
  for (const auto& g : enumerate_grids(gpus)) m->candidates(g, out);
  return out;
}

void check_request(const model::ModelDescription& m, const topo::Topology& t, const PlannerOptions& o) {
  (void)m;
  if (o.gpus < 1) throw InputError("planner", "GPU count " + std::to_string(o.gpus) + " out of range", "--gpus", "an integer >= 1");
  if (o.gpus > t.total_gpus())
    throw InputError("planner", fmt::format("GPU count {} exceeds topology '{}'", o.gpus, t.name), "--gpus",
                fmt::format("at most num_nodes * gpus_per_node = {} * {} = {}", t.num_nodes,
                            t.gpus_per_node, t.total_gpus()));
  if (o.gpus > t.gpus_per_node && o.gpus % t.gpus_per_node != 0)
    throw InputError("planner", fmt::format("GPU count {} does not fill whole nodes of topology '{}'", o.gpus, t.name),
                "--gpus", fmt::format("at most {} or a multiple of gpus_per_node = {}", t.gpus_per_node, t.gpus_per_node));
  if (o.batch_seqs < 1)
    throw InputError("planner", "batch of " + std::to_string(o.batch_seqs) + " sequences", "--batch-seqs/--batch-tokens",
                "at least one sequence");
  if (o.microbatch_seqs < 0)
    throw InputError("planner", "negative micro-batch size", "--microbatch-seqs", "an integer >= 1 (0 = default rule)");
}

std::vector<plan::OptimizerSettings> memory_options(const PlannerOptions& o, const topo::Grid& g) {
  std::vector<plan::OptimizerSettings> out{o.optimizer};
  if (!o.search_memory_options) return out;
  for (int64_t zero = 0; zero <= plan::OptimizerSettings::kMaxZeroStage; ++zero)
    for (bool offload : {false, true}) {
      if (zero > 0 && g.gdata == 1) continue;  // nothing to shard
      if (zero == o.optimizer.zero && offload == o.optimizer.offload) continue;
      plan::OptimizerSettings s = o.optimizer;
      s.zero = zero;
      s.offload = offload;
      out.push_back(s);
    }
  return out;
}

std::vector<topo::PlacementOrder> placement_orders(const topo::Grid& g, const topo::PlacementOrder& base) {
  std::vector<int> slots;  // positions in `base` of the axes of size 2 or more
  for (int i = 0; i < topo::kNumAxes; ++i)
    if (g.size(base[i]) > 1) slots.push_back(i);
  std::vector<int> perm(slots.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<topo::PlacementOrder> out;
  do {  // perm starts sorted, so the first order is `base` itself
    topo::PlacementOrder o = base;
    for (size_t j = 0; j < slots.size(); ++j) o[slots[j]] = base[slots[perm[j]]];
    out.push_back(o);
  } while (std::next_permutation(perm.begin(), perm.end()));
  return out;
}

bool better_evaluation(const Evaluation& a, const Evaluation& b, CommModel model) {
  if (a.feasible != b.feasible) return a.feasible;
  if (!a.feasible)
    return a.rejection == Rejection::Memory && b.rejection == Rejection::Memory &&
           a.memory.total_bytes() < b.memory.total_bytes();
  const double ta = model == CommModel::Full ? a.batch_s : a.comm_s, tb = model == CommModel::Full ? b.batch_s : b.comm_s;
  if (ta != tb) return ta < tb;
  return a.memory.total_bytes() < b.memory.total_bytes();
}

namespace {

// One evaluator per memory option (memory_options() of a grid with Gdata > 1, which
// lists them all); evaluate() keeps the best of those that apply to the grid, and with
// the order search the best over the grid's placement orders too (o.order first, so
// ties keep it).
class OptionSearch {
 public:
  OptionSearch(const model::ModelDescription& m, const topo::Topology& t, const PlannerOptions& o)
      : model_(o.comm_model), base_order_(o.order), search_order_(o.search_order && o.placement_aware) {
    const auto all = memory_options(o, topo::Grid{1, 1, 1, 2, 1});
    evaluators_.reserve(all.size());
    for (const auto& s : all) {
      PlannerOptions v = o;
      v.optimizer = s;
      evaluators_.emplace_back(m, t, v);
      shards_.push_back(s.zero > 0 && s.zero != o.optimizer.zero);
    }
  }
  Evaluation evaluate(const topo::Grid& g, Evaluator::Scratch& sc) const {
    Evaluation best = evaluators_.front().evaluate(g, sc);
    // Without the search: the one order, and no allocation per candidate.
    std::vector<topo::PlacementOrder> searched;
    if (search_order_) searched = placement_orders(g, base_order_);
    const topo::PlacementOrder* orders = search_order_ ? searched.data() : &base_order_;
    const size_t count = search_order_ ? searched.size() : 1;
    for (size_t k = 0; k < count; ++k)
      for (size_t i = k == 0 ? 1 : 0; i < evaluators_.size(); ++i) {
        if (shards_[i] && g.gdata == 1) continue;
        Evaluation e = evaluators_[i].evaluate(g, orders[k], sc);
        if (better_evaluation(e, best, model_)) best = std::move(e);
      }
    return best;
  }

 private:
  CommModel model_;
  topo::PlacementOrder base_order_;
  bool search_order_;
  std::vector<Evaluator> evaluators_;
  std::vector<bool> shards_;  // a searched ZeRO option: skipped where Gdata = 1
};

}  // namespace

Evaluation evaluate(const model::ModelDescription& m, const topo::Topology& t, const topo::Grid& g,
                    const PlannerOptions& o) {
  Evaluator::Scratch scratch;
  return OptionSearch(m, t, o).evaluate(g, scratch);
}

Evaluation evaluate_layer_by_layer(const model::ModelDescription& m, const topo::Topology& t, const topo::Grid& g,
                                   const PlannerOptions& o) {
  Evaluator::Scratch scratch;
  return Evaluator(m, t, o, Evaluator::Sharing::None).evaluate(g, scratch);
}

Ranking rank_candidates(const model::ModelDescription& m, const topo::Topology& t, const PlannerOptions& o) {
  check_request(m, t, o);
  std::vector<topo::Grid> grids;
  if (o.rank_4d) {
    const std::vector<topo::Grid> all = enumerate_grids(o.gpus);
    auto selected = [&](const char* name) {
      return std::find(o.tensor_modes.begin(), o.tensor_modes.end(), name) != o.tensor_modes.end();
    };
    for (const auto& name : o.tensor_modes) plan::find_tensor_mode(name, "planner", "tensor mode");  // known
    for (const auto& mode : plan::tensor_modes()) {  // the registry's order, each grid once
      if (!selected(mode.name) || (mode.within && selected(mode.within))) continue;
      if (o.comm_model == CommModel::Paper && !mode.paper_model) continue;
      for (const auto& g : all)
        if (o.comm_model != CommModel::Paper || g.ginter == 1) mode.candidates(g, grids);
    }
  }
  const OptionSearch search(m, t, o);
  std::vector<Evaluation> results(grids.size());
  // Threads take chunks of candidates in turn; each result lands at its grid's index,
  // so the outcome does not depend on the thread count.
  constexpr size_t kChunk = 64;
  std::atomic<size_t> next{0};
  auto work = [&] {
    Evaluator::Scratch scratch;
    for (size_t begin; (begin = next.fetch_add(kChunk)) < grids.size();)
      for (size_t i = begin; i < std::min(begin + kChunk, grids.size()); ++i)
        results[i] = search.evaluate(grids[i], scratch);
  };
  const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min(o.threads > 0 ? static_cast<size_t>(o.threads) : hardware,
                                  (grids.size() + 4 * kChunk - 1) / (4 * kChunk));
  std::vector<std::thread> pool;
  for (size_t i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  if (o.rank_l2l) {
    // L2L's candidates: each u dividing a replica's sequences, each stash tier.
    const int64_t per_replica = o.batch_seqs % o.gpus == 0 ? o.batch_seqs / o.gpus : 0;
    for (int64_t u = 1; u <= per_replica; ++u) {
      if (per_replica % u != 0 || (o.l2l_microbatches > 0 && u != o.l2l_microbatches)) continue;
      for (auto tier : {plan::StashTier::Host, plan::StashTier::Device})
        if (!o.l2l_stash || *o.l2l_stash == tier)
          results.push_back(evaluate_l2l(m, t, o, L2LCandidate{u, {tier, o.l2l_prefetch}, true}).eval);
    }
    if (o.l2l_microbatches > 0 && (per_replica == 0 || per_replica % o.l2l_microbatches != 0))
      results.push_back(  // rejected: says why
          evaluate_l2l(m, t, o,
                       L2LCandidate{o.l2l_microbatches, {o.l2l_stash.value_or(plan::StashTier::Host), o.l2l_prefetch}, true})
              .eval);
  }

  // Best first: least batch time (paper: communication), then memory, then the
  // strategy (4D first), the grid and L2L's settings.
  const bool by_batch = o.comm_model == CommModel::Full;
  using Key = std::tuple<double, double, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int>;
  std::vector<std::pair<Key, size_t>> order;
  for (size_t i = 0; i < results.size(); ++i) {
    const Evaluation& e = results[i];
    if (!e.feasible) continue;
    order.push_back({Key{by_batch ? e.batch_s : e.comm_s, e.memory.total_bytes(), static_cast<int>(e.strategy), e.grid.gx,
                         e.grid.gy, e.grid.gz, e.grid.gdata, e.grid.ginter, e.grid.sequence, e.microbatches,
                         static_cast<int>(e.l2l.stash)},
                     i});
  }
  std::sort(order.begin(), order.end());
  Ranking r;
  r.feasible.reserve(order.size());
  for (const auto& [key, i] : order) r.feasible.push_back(std::move(results[i]));
  // The rejected stay where they are, in enumeration order (no second copy of them all).
  results.erase(std::remove_if(results.begin(), results.end(), [](const Evaluation& e) { return e.feasible; }),
                results.end());
  r.rejected = std::move(results);
  return r;
}

std::string tensor_mode_name(const topo::Grid& g) { return plan::tensor_mode_of(g).name; }

void select_tensor_modes(PlannerOptions& o, const std::string& mode, const std::string& where) {
  o.tensor_modes.clear();
  if (mode == "all") {
    for (const auto& m : plan::tensor_modes())
      if (m.in_all) o.tensor_modes.push_back(m.name);
    return;
  }
  for (const auto& m : plan::tensor_modes())
    if (mode == m.name) return o.tensor_modes.push_back(m.name);
  throw InputError("planner", "tensor mode '" + mode + "'", where, plan::tensor_mode_list() + " or all");
}

std::string strategy_label(const Evaluation& e) {
  if (e.strategy != plan::Strategy::L2L) return plan::tensor_mode_label(e.grid);
  return fmt::format("l2l u={} {}{}", e.microbatches, plan::stash_tier_name(e.l2l.stash), e.l2l.prefetch ? "" : " no-prefetch");
}

plan::Plan make_plan(const model::ModelDescription& m, const topo::Topology& t, const PlannerOptions& o,
                     const Evaluation& e, int64_t rank, int64_t candidates) {
  plan::Plan p;
  p.model = m;
  p.topology = t;
  p.gpus = o.gpus;
  p.grid = e.grid;
  p.placement_order = e.order;
  p.batch = {o.batch_seqs, e.microbatch_seqs};
  p.activation_checkpointing = o.activation_checkpointing;
  p.checkpoint_interval = e.checkpoint_interval;
  p.overlap = o.overlap;
  p.precision = o.precision;
  p.optimizer = e.optimizer;
  p.pipeline.schedule = o.pipeline_schedule;
  p.pipeline.limit = o.pipeline_limit;
  if (e.grid.ginter > 1) p.pipeline.stage_units = e.stage_units;
  p.strategy = e.strategy;
  if (e.strategy == plan::Strategy::L2L) {  // the unit's recompute is L2L's; its server is the optimizer
    p.l2l = e.l2l;
    p.activation_checkpointing = false;
    p.optimizer = plan::OptimizerSettings{};
  }
  plan::Prediction pr;
  pr.comm_model = comm_model_name(o.comm_model);
  pr.placement_aware = o.placement_aware;
  pr.comm_s = e.comm_s;
  pr.comm_breakdown_s = e.comm;
  pr.batch_s = e.batch_s;
  pr.compute_s = e.compute_s;
  pr.exposed_comm_s = e.exposed_comm_s;
  pr.memory_bytes_per_gpu = static_cast<int64_t>(e.memory.total_bytes());
  pr.host_memory_bytes_per_gpu = static_cast<int64_t>(e.memory.host_bytes);
  pr.memory_breakdown_bytes = memory_prediction(e.memory);
  pr.rank = rank;
  pr.candidates_ranked = candidates;
  p.prediction = pr;
  return p;
}

std::string explain_infeasible(const Ranking& r, const topo::Topology& t) {
  const Evaluation* smallest = nullptr;
  for (const auto& e : r.rejected)
    if (e.rejection == Rejection::Memory &&
        (!smallest || e.memory.total_bytes() < smallest->memory.total_bytes()))
      smallest = &e;
  if (smallest)
    return fmt::format("smallest memory per GPU is {} (grid {})",
                       memory_over_limit(smallest->memory.total_bytes(), static_cast<double>(t.gpu_memory_bytes)),
                       smallest->grid.to_string());
  if (!r.rejected.empty())
    return "no grid divides the model and batch (first: " + r.rejected.front().grid.to_string() + ": " +
           r.rejected.front().rejected_because + ")";
  return "no candidate grids";
}

}  // namespace axonn::planner
