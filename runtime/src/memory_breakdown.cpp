// A rank's device memory by what holds it; see axonn/runtime/memory_breakdown.hpp.
#include "axonn/runtime/memory_breakdown.hpp"

#include <unordered_set>

#include "axonn/runtime/device_memory.hpp"

namespace axonn::runtime {

namespace {

// The bytes of the counted storages of `tensors`, each storage once.
int64_t storage_bytes(const std::vector<at::Tensor>& tensors) {
  std::unordered_set<const void*> seen;
  int64_t bytes = 0;
  for (const auto& t : tensors) {
    if (!DeviceMemory::counts(t)) continue;
    if (seen.insert(t.storage().data_ptr().get_context()).second) bytes += static_cast<int64_t>(t.storage().nbytes());
  }
  return bytes;
}

}  // namespace

DeviceMemoryBreakdown device_memory_at_step_start(const std::vector<Parameter>& params,
                                                  const std::vector<at::Tensor>& held_weights,
                                                  const std::vector<at::Tensor>& held_gradients) {
  std::vector<at::Tensor> weights = held_weights, grads = held_gradients;
  for (const auto& p : params) {
    if (!p.tensor.defined()) continue;  // L2L: a unit's weights between its visits
    weights.push_back(p.tensor);
    grads.push_back(p.tensor.grad());
  }
  DeviceMemoryBreakdown b;
  b.parameter_bytes = storage_bytes(weights);
  b.gradient_bytes = storage_bytes(grads);
  // Never negative: the storages counted are live, each once (the test checks > 0).
  b.other_resident_bytes = DeviceMemory::live_bytes() - b.parameter_bytes - b.gradient_bytes;
  return b;
}

}  // namespace axonn::runtime
