// L2L's eager parameter server (EPS, seed-spec B1): the whole model's fp32 master
// weights, Adam's two moments and an fp32 gradient buffer in the host tier
// (host_memory.hpp: 16 bytes per parameter), and the copies between it and the device.
// The device holds a unit's parameters only between its Fetch and its Release or Push
// (axonn/schedule/l2l.hpp); otherwise they hold no elements.
//
//   fetch / prefetch  the unit's master copied to the device in the compute type (a
//                     worker thread prefetches: the CPU stand-in for a copy stream; the
//                     buffers are allocated when the prefetch is issued)
//   push              the unit's gradients copied to the host buffer (fp32) and freed
//                     with its weights; the server thread then sums the buffer over the
//                     data group (every replica pushes the same units in the same
//                     order) and, eagerly, applies Adam to the unit while the device
//                     computes the next ones. With clipping on the global norm needs
//                     every unit: the updates then wait for the step's last push.
//   wait_updates      every push of the step reduced and applied; the global norm
//
// Every replica keeps the whole state and applies the same summed gradient, so the
// data group shares one model state (the paper's EPS is one per node; sharding it over
// the data group, as ZeRO does, is not built). The server thread makes MPI calls on a
// communicator of its own (MPI_THREAD_MULTIPLE); the trainer makes none during a step.
// Cross mixed precision (the paper's CMP): the device computes in bf16, the master and
// the update stay fp32.
//
// Example:
//   ParameterServer eps(grid.data(), {1e-3}, /*max_grad_norm=*/1.0);
//   int64_t u = eps.add_unit(model.parameters());   // copies the values, frees the device's
//   eps.fetch(u);  ... forward and backward ...  eps.push(u);
//   double norm = eps.wait_updates();
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <mutex>
#include <vector>

#include "axonn/runtime/adam.hpp"
#include "axonn/runtime/communicator.hpp"
#include "axonn/runtime/sharding.hpp"
#include "axonn/runtime/training_state.hpp"
#include "axonn/runtime/worker_thread.hpp"

namespace axonn::runtime {

class ParameterServer {
 public:
  // `data`: the data-parallel group (the server splits a communicator of its own from it).
  ParameterServer(Communicator& data, const AdamSettings& adam, double max_grad_norm);
  ~ParameterServer();
  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;

  // Takes the unit's parameters (their current values become the master; their element
  // type is the device copies') and frees their device elements. The parameters must
  // outlive the server. Returns the unit's index.
  int64_t add_unit(std::vector<Parameter>& params);
  int64_t units() const { return static_cast<int64_t>(units_.size()); }
  int64_t unit_elements(int64_t unit) const;

  void prefetch(int64_t unit);  // at most one prefetch in flight
  void fetch(int64_t unit);     // the prefetched copy, or a copy now
  void release(int64_t unit);   // the weights' device elements freed
  void push(int64_t unit);      // gradients to the host, device elements freed, reduction queued
  // Blocks until every push so far is reduced and applied; returns the global norm of
  // the step's gradient (before clipping; 0 if no unit was pushed).
  double wait_updates();

  // The master weights of a unit's parameters, shaped as the parameters (host tier).
  std::vector<at::Tensor> master(int64_t unit) const;
  // Every unit's parameters (names, specs, full shapes; no elements), in unit order.
  std::vector<Parameter> parameters() const;
  // Their weights and Adam's state in the checkpoint layout (training_state.hpp): the
  // weights in the compute type from the master, the master itself when that type is
  // narrower than fp32; between steps (after wait_updates). load_state: the inverse.
  TrainingState state() const;
  void load_state(const TrainingState& s);
  // Seconds the caller was blocked in fetch (waiting for a copy) since the last call.
  double take_fetch_wait_s();
  double take_copy_s();  // seconds of host-to-device copies (on either thread) since the last call
  double take_push_s();  // seconds of pushes (gradients to the host, on the caller's thread) since the last call
  // Seconds the server thread spent reducing and updating since the last call (after
  // wait_updates, so that the step's work is all in).
  double take_server_s();

 private:
  struct Unit;
  std::vector<at::Tensor> allocate_on_device(const Unit& u) const;  // the unit's device buffers, uninitialised
  void copy_to_device(const Unit& u, std::vector<at::Tensor>& out);  // the master into them
  void reduce(Unit& u);      // on the server thread
  void update(Unit& u, double coef);
  void finish_step_on_server();

  std::unique_ptr<Communicator> group_;
  AdamSettings adam_;
  double max_grad_norm_;
  at::ScalarType compute_ = at::kFloat;  // the first unit's parameters'
  std::vector<std::unique_ptr<Unit>> units_;
  int64_t step_ = 0;
  int64_t pushed_ = 0;     // units pushed this step (main thread)
  double sum_squares_ = 0; // of the reduced gradients this step (server thread)
  double norm_ = 0;        // the last step's global norm (server thread, read after wait)
  int64_t prefetching_ = -1;
  std::vector<at::Tensor> prefetched_;
  std::mutex time_mu_;
  double fetch_wait_s_ = 0, copy_s_ = 0, push_s_ = 0, server_s_ = 0;
  WorkerThread copier_;  // prefetch copies
  WorkerThread server_;  // reductions and updates
};

}  // namespace axonn::runtime
