// A rank's device memory at a training step, split by what holds it: the local
// parameter shards, their gradients, the rest of what lives between steps (Adam's
// moments and master weights where they stay on the device, kept buffers), and what
// the step itself adds on top (activations, gathered weights, communication buffers:
// the step's peak above the live bytes it started from). The four add up to the
// step's peak. All in bytes counted by the device allocator (device_memory.hpp), so
// host-tier tensors are not in them; a storage shared by several views (ZeRO's flat
// buffers) is counted once. axrun writes it for every rank (docs/runtime.md).
//
// Example:
//   DeviceMemory::reset_peak();
//   DeviceMemoryBreakdown b = device_memory_at_step_start(trainer.parameters(),
//       trainer.optimizer().held_weights(), trainer.optimizer().held_gradients());
//   trainer.step(batch);
//   b.end_step(DeviceMemory::peak_bytes());
#pragma once

#include <cstdint>
#include <vector>

#include "axonn/runtime/sharding.hpp"

namespace axonn::runtime {

struct DeviceMemoryBreakdown {
  int64_t parameter_bytes = 0;       // the parameters' storages
  int64_t gradient_bytes = 0;        // their gradients' storages
  int64_t other_resident_bytes = 0;  // the rest of the live bytes at the step's start
  int64_t step_bytes = 0;            // the step's peak above the live bytes at its start
  int64_t live_at_start_bytes() const { return parameter_bytes + gradient_bytes + other_resident_bytes; }
  int64_t peak_bytes() const { return live_at_start_bytes() + step_bytes; }
  // Sets step_bytes from the step's peak (DeviceMemory::peak_bytes() after the step).
  void end_step(int64_t step_peak_bytes) { step_bytes = step_peak_bytes - live_at_start_bytes(); }
};

// The live device bytes now (DeviceMemory::live_bytes()), split into the storages of
// the weights (`params`' tensors and `held_weights`) and of their gradients (their .grad
// and `held_gradients`: Optimizer::held_weights / held_gradients, where the optimizer
// keeps them itself, as ZeRO's owned blocks), and the rest. Called at a step's start.
// Gradients that do not live there (LibTorch's Adam allocates .grad in a run's first
// backward; FlatAdam's buffers exist from its construction) are in that step's
// step_bytes. Undefined tensors (an L2L unit's weights between its visits) count nothing.
DeviceMemoryBreakdown device_memory_at_step_start(const std::vector<Parameter>& params,
                                                  const std::vector<at::Tensor>& held_weights = {},
                                                  const std::vector<at::Tensor>& held_gradients = {});

}  // namespace axonn::runtime
