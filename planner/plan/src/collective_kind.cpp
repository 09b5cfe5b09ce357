// Collective kinds; see axonn/plan/collective_kind.hpp.
#include "axonn/plan/collective_kind.hpp"

#include <array>
#include <string_view>

namespace axonn::plan {

namespace {

struct KindInfo {
  const char* name;
  const char* term;
};
// The one term whose kinds validate measures by their waits (collective_kind.hpp).
constexpr std::string_view kTermMeasuredByWait = "summa";
// Indexed by CollectiveKind.
constexpr std::array<KindInfo, kNumCollectiveKinds> kKinds = {{
    {"ag_z", "ag_z"},         {"rs_z", "rs_z"},         {"ar_x", "ar_x"},           {"ar_y", "ar_y"},
    {"ag_x", "act_x"},        {"rs_x", "act_x"},        {"ag_y", "act_y"},          {"rs_y", "act_y"},
    {"ar_data", "ar_data"},   {"rs_data", "ar_data"},   {"ag_data", "ar_data"},     {"ar_z_data", "small"},
    {"rs_z_data", "small"},   {"ag_z_data", "small"},
    {"ar_x_norm", "small"},   {"ar_y_norm", "small"},   {"ar_x_vector", "small"},   {"ar_y_vector", "small"},
    {"ar_x_loss", "small"},   {"ar_y_loss", "small"},   {"ar_pipe_loss", "small"},
    {"p2p_seq", "p2p_seq"},
    {"bc_y", "summa"},        {"rd_y", "summa"},        {"bc_z", "summa"},          {"rd_z", "summa"},
}};

}  // namespace

const char* collective_kind_name(CollectiveKind k) { return kKinds[static_cast<size_t>(k)].name; }

std::optional<CollectiveKind> parse_collective_kind(const std::string& name) {
  for (size_t i = 0; i < kKinds.size(); ++i)
    if (name == kKinds[i].name) return static_cast<CollectiveKind>(i);
  return std::nullopt;
}

const char* breakdown_term(CollectiveKind k) { return kKinds[static_cast<size_t>(k)].term; }

bool measured_by_wait(CollectiveKind k) { return breakdown_term(k) == kTermMeasuredByWait; }

bool term_measured_by_wait(const std::string& term) { return term == kTermMeasuredByWait; }

bool term_is_traced(const std::string& term) {
  for (const KindInfo& k : kKinds)
    if (term == k.term) return true;
  return false;
}

}  // namespace axonn::plan
