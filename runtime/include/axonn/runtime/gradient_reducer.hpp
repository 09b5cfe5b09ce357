// Where weight gradients go: one of the three seams of the runtime (docs/architecture.md).
// The operators hand each layer's dW block over; the reducer follows the schedule's
// backward pass program (axonn/schedule/pass.hpp): it checks the order, reduce-scatters
// the block over Z into the shard's gradient (optimization 2: queued, waited for at the
// end of the pass), forms the data-parallel buckets the program lists (in the step's
// last backward) and all-reduces each over the data group once its layers'
// reduce-scatters have completed; finish_step() completes every data-parallel
// reduction (ReduceGradients), including the parameters replicated over Z.
//
// With `optimizer_reduces` (the offloaded optimizer, optimizer.hpp) the data-parallel
// reductions are the optimizer's: finish_step() only completes the reduce-scatters' work.
//
// With a sink (gradient_sink.hpp, ZeRO-2's optimizer) each layer's gradient goes to the
// sink instead of the shard's .grad, once per backward pass. Each reduce_scatter() then
// bounds what is in flight, waiting (in order) until at most kSinkDepth reduce-scatters
// over Z and kSinkDepth of the sink's reductions remain, so a few layers' gradients are
// alive instead of the pass's (optimization 2 without a sink keeps them all);
// end_backward() completes both.
//
// BucketedReducer is the 4D paper's; L2L's push to a parameter server implements the
// same interface later.
//
// Example:
//   reducer.begin_backward(schedule.last_backward, /*last=*/true);
//   ... autograd: reducer.reduce_scatter(layer, dw) per layer ...
//   reducer.end_backward();   reducer.finish_step();
#pragma once

#include <ATen/ATen.h>

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "axonn/plan/plan.hpp"
#include "axonn/runtime/gradient_sink.hpp"
#include "axonn/runtime/pass_recorder.hpp"
#include "axonn/runtime/process_grid.hpp"
#include "axonn/runtime/sharding.hpp"
#include "axonn/runtime/trace.hpp"
#include "axonn/schedule/pass.hpp"

namespace axonn::runtime {

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  virtual void add_layer(int64_t layer, at::Tensor* shard) = 0;
  // Every parameter of the stage (those replicated over Z are reduced in finish_step).
  virtual void set_parameters(std::vector<Parameter>* params) = 0;
  // Null: each layer's gradient is accumulated into its shard's .grad.
  virtual void set_sink(GradientSink* sink) = 0;
  // `last`: the step's last backward on this stage (gradients become final).
  virtual void begin_backward(const std::vector<schedule::LayerInstruction>& program, bool last) = 0;
  // The layer's dW block: reduce-scattered over Z, or, where the program says
  // ReducedGradient (2d-broadcast's linear layers), already summed over Z and taken as is.
  virtual void reduce_scatter(int64_t layer, const at::Tensor& dw_block) = 0;
  // WaitReduceScatters, and the program's last bucket.
  virtual void end_backward() = 0;
  // ReduceGradients: every data-parallel reduction of the step complete.
  virtual void finish_step() = 0;
  virtual void poll() = 0;
};

class BucketedReducer final : public GradientReducer {
 public:
  BucketedReducer(ProcessGrid& grid, const plan::OverlapSettings& overlap, bool optimizer_reduces, Tracer* tracer,
                  PassRecorder& recorder);
  ~BucketedReducer() override;

  void add_layer(int64_t layer, at::Tensor* shard) override;
  void set_parameters(std::vector<Parameter>* params) override { params_ = params; }
  void set_sink(GradientSink* sink) override { sink_ = sink; }
  void begin_backward(const std::vector<schedule::LayerInstruction>& program, bool last) override;
  void reduce_scatter(int64_t layer, const at::Tensor& dw_block) override;
  void end_backward() override;
  void finish_step() override;
  void poll() override;

  static constexpr size_t kSinkDepth = 2;  // with a sink: reductions in flight after a layer's hand-over

 private:
  struct Pending {
    WorkHandle work;
    plan::CollectiveKind kind = plan::CollectiveKind::RsZ;
    double issued_at = 0;
    std::function<void()> on_done;
  };
  struct Bucket {
    std::vector<int64_t> layers;
    bool issued = false;
  };
  at::Tensor* shard(int64_t layer);
  void accumulate(int64_t layer, const at::Tensor& grad_shard);
  void take_buckets();        // the program's BucketAllReduce instructions up to its next ReduceScatter
  void issue_ready_buckets(); // in order, each once its layers' reduce-scatters completed
  void wait_pending(Pending& p);
  void finish_pending(Pending& p, double exposed_s);

  ProcessGrid& grid_;
  plan::OverlapSettings overlap_;
  bool optimizer_reduces_;  // the data-parallel reductions are the optimizer's
  Tracer* tracer_;
  PassRecorder& recorder_;
  std::vector<at::Tensor*> shards_;
  std::vector<Parameter>* params_ = nullptr;
  GradientSink* sink_ = nullptr;
  std::vector<schedule::LayerInstruction> ops_;  // the pass's ReduceScatter and BucketAllReduce instructions
  size_t next_ = 0;
  bool last_ = false;
  std::vector<int64_t> scattered_;  // layers reduce-scattered in this pass, in order
  std::vector<bool> rs_done_;       // by layer: its reduce-scatter of this pass completed
  std::vector<bool> data_reduced_;  // by layer: all-reduced over data in a bucket this step
  std::deque<Bucket> buckets_;      // listed by the program, not issued yet
  std::deque<std::unique_ptr<Pending>> pending_rs_;    // optimization 2, in issue order
  std::deque<std::unique_ptr<Pending>> pending_data_;  // issued buckets
};

}  // namespace axonn::runtime
