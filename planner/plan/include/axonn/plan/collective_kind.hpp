// The kinds of collective a training step issues: one enum shared by the runtime, which
// records each collective's time under its kind (the measurement JSON's `by_kind`), and
// the planner, whose CommBreakdown predicts them term by term. validate sets the two
// side by side per term (docs/validation.md, "Per collective").
//
// A kind names the operation and the group: `ar_x` an all-reduce over X, `rs_z` a
// reduce-scatter over Z, `ag_data` an all-gather over the data group. Kinds with a
// suffix are the small collectives, the CommBreakdown term `small` (docs/model.md
// section 8): the layer norms' statistics (`ar_x_norm`), a bias or gain split by rows
// (`ar_x_vector`), the loss's reductions (`ar_y_loss`, `ar_pipe_loss`), and the
// parameters replicated over Z reduced over Z and data (`ar_z_data`; ZeRO's
// `rs_z_data`, `ag_z_data`).
//
// Example:
//   plan::collective_kind_name(plan::CollectiveKind::RsZ);   // "rs_z"
//   plan::breakdown_term(plan::CollectiveKind::AgY);         // "act_y": 2d/3d activations
//   plan::breakdown_term(plan::CollectiveKind::ArXNorm);     // "small"
//   plan::measured_by_wait(plan::CollectiveKind::BcY);       // true: SUMMA's moves
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace axonn::plan {

enum class CollectiveKind : uint8_t {
  AgZ, RsZ,                // the weights' all-gather and dW's reduce-scatter over Z
  ArX, ArY,                // AxoNN's and 1d's all-reduces of activations and dI
  AgX, RsX, AgY, RsY,      // 2d's and 3d's gathers and scatters of activations and dI
  ArData, RsData, AgData,  // data parallelism: buckets; ZeRO's reduce-scatter and gather
  ArZData, RsZData, AgZData,  // parameters replicated over Z, over Z x data (ZeRO: scattered, gathered)
  ArXNorm, ArYNorm,        // the layer norms' row statistics
  ArXVector, ArYVector,    // 3d: a vector's gradient summed over the rows' group
  ArXLoss, ArYLoss, ArPipeLoss,  // the loss's reductions
  P2pSeq,                  // ring self-attention's shifts in the sequence group (their waits)
  BcY, RdY,                // 2d-broadcast: SUMMA's input blocks broadcast along Y, dI's reduced
  BcZ, RdZ,                // 2d-broadcast: SUMMA's weight blocks broadcast along Z, dW's reduced
                           // (the four: the term `summa`, measured by their waits)
};
inline constexpr int kNumCollectiveKinds = static_cast<int>(CollectiveKind::RdZ) + 1;

const char* collective_kind_name(CollectiveKind k);  // "ag_z", "ar_x_norm", ...
std::optional<CollectiveKind> parse_collective_kind(const std::string& name);

// The CommBreakdown term (its JSON name: "ag_z", "rs_z", "ar_x", "ar_y", "act_x",
// "act_y", "ar_data", "small", "p2p_seq", "summa") that predicts the kind's time.
const char* breakdown_term(CollectiveKind k);
// Whether validate measures the kind by the time the rank sat blocked waiting for it
// (the measurement's `exposed_s`) rather than from its issue to its completion
// (`busy_s`): SUMMA's moves (`summa`), issued a step ahead of their use by design, whose
// spans cover the products between. Their term's prediction is then what the model
// leaves exposed (Evaluation::summa_exposed_s). Every kind of a term agrees.
bool measured_by_wait(CollectiveKind k);
bool term_measured_by_wait(const std::string& term);

// Whether some kind is predicted by `term`: the runtime traces its collectives and the
// ring's shifts (the pipeline's point-to-point messages are not traced: their waits are
// the pipeline's).
bool term_is_traced(const std::string& term);

}  // namespace axonn::plan
