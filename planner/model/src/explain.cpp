// One grid in detail; see axonn/planner/explain.hpp.
#include "axonn/planner/explain.hpp"

#include "axonn/common/error.hpp"
#include "axonn/planner/bandwidth.hpp"
#include "axonn/planner/simulated_schedule.hpp"
#include "evaluator.hpp"

namespace axonn::planner {

Explanation explain(const model::ModelDescription& m, const topo::Topology& t, const topo::Grid& g,
                    const PlannerOptions& o) {
  check_request(m, t, o);
  const Evaluator evaluator(m, t, o);
  Evaluator::Scratch scratch;
  Explanation x;
  x.evaluation = evaluator.evaluate(g, scratch);
  const bool paper = o.comm_model == CommModel::Paper;
  const AxisBandwidths bw =
      o.placement_aware
          ? placement_aware_bandwidths(t, g, o.order, paper ? BandwidthRule::Strict : BandwidthRule::Straddle)
          : placement_agnostic_bandwidths(t, g);
  const topo::RankLayout layout(g, o.order);
  for (int i = 0; i < topo::kNumAxes; ++i) {
    const auto a = static_cast<topo::Axis>(i);
    AxisPlacement& p = x.axes[i];
    p.size = g.size(a);
    p.ip = layout.inner_size(a);
    p.inside_node = group_inside_node(t, p.ip, p.size, paper ? BandwidthRule::Strict : BandwidthRule::Straddle);
    p.bandwidth_bytes_per_s = bw[i];
    p.out_of_step_share = scratch.out_of_step_share[i];
  }
  if (x.evaluation.microbatches == 0) return x;  // did not divide: no costs
  for (size_t c = 0; c < evaluator.classes().size(); ++c) {
    const auto& k = evaluator.classes()[c];
    x.layers.push_back({k.layer->name, model::layer_kind_name(k.layer->kind), k.count, scratch.costs[c],
                        scratch.optimizer_s[c]});
  }
  if (x.evaluation.batch_s > 0)  // timed (the paper's model times no step)
    x.stages.assign(scratch.stages.begin(), scratch.stages.begin() + static_cast<std::ptrdiff_t>(g.ginter));
  return x;
}

std::vector<SimulatedStage> simulated_schedule(const model::ModelDescription& m, const topo::Topology& t,
                                               const topo::Grid& g, const PlannerOptions& o) {
  check_request(m, t, o);
  const Evaluator evaluator(m, t, o);
  Evaluator::Scratch scratch;
  std::vector<std::vector<SimulatedInstruction>> trace;
  const Evaluation e = evaluator.evaluate(g, scratch, &trace);
  if (!e.feasible) throw InputError("planner", "grid rejected: " + e.rejected_because, g.to_string(), "a feasible grid");
  schedule::PassSettings ps;
  ps.overlap = o.overlap;
  ps.checkpointing = o.activation_checkpointing;
  ps.data_parallel = schedule::data_parallel_in_backward(g, o.optimizer);
  std::vector<SimulatedStage> out(static_cast<size_t>(g.ginter));
  for (int64_t s = 0; s < g.ginter; ++s) {
    SimulatedStage& st = out[static_cast<size_t>(s)];
    st.steps = trace[static_cast<size_t>(s)];
    st.layers = evaluator.stage_pass_layers(e, scratch, s);
    const auto* l = st.layers.data();
    st.forward = schedule::pass_program(l, st.layers.size(), ps, schedule::PassKind::Forward);
    st.backward = schedule::pass_program(l, st.layers.size(), ps, schedule::PassKind::Backward);
    st.last_backward = schedule::pass_program(l, st.layers.size(), ps, schedule::PassKind::LastBackward);
  }
  return out;
}

}  // namespace axonn::planner
