// Grid/model/batch divisibility; see axonn/plan/divisibility.hpp. What a tensor layout
// adds comes from its entry (axonn/plan/layout_rules.hpp).
#include "axonn/plan/divisibility.hpp"

#include "axonn/plan/layout_rules.hpp"

namespace axonn::plan {

std::optional<std::string> batch_divisibility_problem(const model::ModelDescription& m, const topo::Grid& g,
                                                      int64_t batch_seqs, int64_t microbatch_seqs) {
  if (g.sequence > 1) {  // the sequence mode: a chunk of every sequence per member, no tensor axes
    if (g.gdata % g.sequence != 0) return not_divisible("gdata", g.gdata, "the sequence group", g.sequence);
    if (m.seq_len % g.sequence != 0) return not_divisible("sequence length", m.seq_len, "the sequence group", g.sequence);
    if (g.gx * g.gy * g.gz != 1)
      return "sequence parallelism (sequence=" + std::to_string(g.sequence) + ") with tensor axes " + g.to_string() +
             ": it needs gx = gy = gz = 1";
  }
  const LayoutRules& rules = layout_rules(g.layout);
  if (rules.shape_problem)
    if (auto why = rules.shape_problem(g)) return why;
  if (batch_seqs % g.replicas() != 0)
    return not_divisible("batch sequences", batch_seqs, "replicas (gdata/sequence)", g.replicas());
  const int64_t per_group = batch_seqs / g.replicas();
  if (microbatch_seqs < 1 || per_group % microbatch_seqs != 0)
    return not_divisible("sequences per data-parallel group", per_group, "micro-batch sequences", microbatch_seqs);
  if (microbatch_seqs % g.gz != 0) return not_divisible("micro-batch sequences", microbatch_seqs, "gz", g.gz);
  if (rules.microbatch_problem)
    if (auto why = rules.microbatch_problem(g, microbatch_seqs)) return why;
  if (m.num_units < g.ginter)
    return "pipeline units (layers)=" + std::to_string(m.num_units) + " are fewer than ginter=" +
           std::to_string(g.ginter);
  return std::nullopt;
}

bool layer_divides(const model::Layer& l, const topo::Grid& g) { return layout_rules(g.layout).layer_divides(l, g); }

std::string layer_divisibility_problem(const model::Layer& l, const topo::Grid& g) {
  const std::string why = layout_rules(g.layout).layer_problem(l, g);
  return why.empty() ? why : "layer " + l.name + ": " + why;
}

std::optional<std::string> divisibility_problem(const model::ModelDescription& m,
                                                const topo::Grid& g, int64_t batch_seqs,
                                                int64_t microbatch_seqs) {
  if (auto why = batch_divisibility_problem(m, g, batch_seqs, microbatch_seqs)) return why;
  for (const auto& l : m.layers)
    if (!layer_divides(l, g)) return layer_divisibility_problem(l, g);
  return std::nullopt;
}

}  // namespace axonn::plan
