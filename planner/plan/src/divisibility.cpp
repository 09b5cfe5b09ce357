// Grid/model/batch divisibility; see axonn/plan/divisibility.hpp.
#include "axonn/plan/divisibility.hpp"

namespace axonn::plan {
namespace {

std::string not_div(const std::string& what, int64_t a, const std::string& by, int64_t b) {
  return what + "=" + std::to_string(a) + " is not divisible by " + by + "=" + std::to_string(b);
}

}  // namespace

std::optional<std::string> batch_divisibility_problem(const model::ModelDescription& m, const topo::Grid& g,
                                                      int64_t batch_seqs, int64_t microbatch_seqs) {
  if (g.sequence > 1) {  // the sequence mode: a chunk of every sequence per member, no tensor axes
    if (g.gdata % g.sequence != 0) return not_div("gdata", g.gdata, "the sequence group", g.sequence);
    if (m.seq_len % g.sequence != 0) return not_div("sequence length", m.seq_len, "the sequence group", g.sequence);
    if (g.gx * g.gy * g.gz != 1)
      return "sequence parallelism (sequence=" + std::to_string(g.sequence) + ") with tensor axes " + g.to_string() +
             ": it needs gx = gy = gz = 1";
  }
  if (g.summa() && (g.gx != 1 || g.gy != g.gz || g.sequence != 1))
    return "the 2d layout on " + g.to_string() + ": it needs gx = 1, gy = gz (a q x q grid) and no sequence group";
  if (g.threed() && g.sequence != 1) return "the 3d layout with a sequence group (" + g.to_string() + ")";
  if (batch_seqs % g.replicas() != 0) return not_div("batch sequences", batch_seqs, "replicas (gdata/sequence)", g.replicas());
  const int64_t per_group = batch_seqs / g.replicas();
  if (microbatch_seqs < 1 || per_group % microbatch_seqs != 0)
    return not_div("sequences per data-parallel group", per_group, "micro-batch sequences",
                   microbatch_seqs);
  if (microbatch_seqs % g.gz != 0)
    return not_div("micro-batch sequences", microbatch_seqs, "gz", g.gz);
  if (g.threed() && (microbatch_seqs / g.gz) % (g.gx * g.gy) != 0)  // rows split by whole sequences over X and Y
    return not_div("micro-batch sequences per Z-rank", microbatch_seqs / g.gz, "gx*gy (3d)", g.gx * g.gy);
  if (m.num_units < g.ginter)
    return "pipeline units (layers)=" + std::to_string(m.num_units) + " are fewer than ginter=" +
           std::to_string(g.ginter);
  return std::nullopt;
}

bool layer_divides(const model::Layer& l, const topo::Grid& g) {
  if (l.kind == model::LayerKind::Attention) return l.heads % g.gy == 0;
  // 2d: W's blocks are k/q x n/q (its Z chunk a k block), the input's k/q columns.
  if (g.summa()) return l.k % g.gz == 0 && l.n % g.gy == 0 && l.k % g.gy == 0;
  const int64_t gk = l.swaps_xy() ? g.gy : g.gx, gn = l.swaps_xy() ? g.gx : g.gy;
  return l.k % gk == 0 && l.n % gn == 0 && ((l.k / gk) * (l.n / gn)) % g.gz == 0;
}

std::string layer_divisibility_problem(const model::Layer& l, const topo::Grid& g) {
  if (layer_divides(l, g)) return "";
  const std::string p = "layer " + l.name + ": ";
  if (l.kind == model::LayerKind::Attention) return p + not_div("heads", l.heads, "gy", g.gy);
  if (g.summa())
    return p + (l.n % g.gy != 0 ? not_div("n", l.n, "q (2d)", g.gy) : not_div("k", l.k, "q (2d)", g.gy));
  const int64_t gk = l.swaps_xy() ? g.gy : g.gx, gn = l.swaps_xy() ? g.gx : g.gy;
  const char* nk = l.swaps_xy() ? "gy" : "gx";
  const char* nn = l.swaps_xy() ? "gx" : "gy";
  if (l.k % gk != 0) return p + not_div("k", l.k, nk, gk);
  if (l.n % gn != 0) return p + not_div("n", l.n, nn, gn);
  return p + not_div("local weight block", (l.k / gk) * (l.n / gn), "gz", g.gz);
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
