// SUMMA matrix multiplication; see axonn/runtime/summa.hpp.
#include "axonn/runtime/summa.hpp"

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>

#include "axonn/common/error.hpp"

namespace axonn::runtime {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

namespace {

int64_t to_handle(Communicator* c) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(c)); }
Communicator& group_of(const AutogradContext* ctx, const char* key) {
  return *reinterpret_cast<Communicator*>(static_cast<intptr_t>(ctx->saved_data.at(key).toInt()));
}

// Step t's copy of `mine`'s block in `group`: member t's, broadcast (mine itself there).
struct Broadcast {
  at::Tensor block;
  WorkHandle work;
};
Broadcast broadcast_from(Communicator& group, const at::Tensor& mine, int64_t t) {
  at::Tensor b = group.rank() == t ? mine : at::empty_like(mine);
  return {b, group.broadcast(b, static_cast<int>(t))};
}

struct SummaFn : public torch::autograd::Function<SummaFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, at::Tensor w, int64_t row, int64_t column) {
    ctx->saved_data["row"] = row;
    ctx->saved_data["column"] = column;
    Communicator &r = group_of(ctx, "row"), &c = group_of(ctx, "column");
    const int64_t q = r.size();
    at::Tensor y = at::zeros({x.size(0), w.size(1)}, x.options());
    // X_it along the row, W_tj along the column; step t + 1's in flight under step t's matmul.
    Broadcast xs = broadcast_from(r, x, 0), ws = broadcast_from(c, w, 0);
    for (int64_t t = 0; t < q; ++t) {
      xs.work->wait();
      ws.work->wait();
      Broadcast x_next, w_next;
      if (t + 1 < q) x_next = broadcast_from(r, x, t + 1), w_next = broadcast_from(c, w, t + 1);
      y.addmm_(xs.block, ws.block);
      xs = std::move(x_next), ws = std::move(w_next);
    }
    ctx->save_for_backward({x, w});
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    Communicator &r = group_of(ctx, "row"), &c = group_of(ctx, "column");
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1];
    const at::Tensor dy = grads[0].contiguous();
    const int64_t q = r.size();
    at::Tensor dx, dw;
    for (int64_t t = 0; t < q; ++t) {
      // dX_it: this rank's dY_ij W_tj^T, summed over the row at column t.
      Broadcast ws = broadcast_from(c, w, t);
      ws.work->wait();
      at::Tensor part_x = at::matmul(dy, ws.block.t());
      WorkHandle reduce_x = r.reduce(part_x, static_cast<int>(t));
      // dW_tj: X_it^T dY_ij, summed over the column at row t.
      Broadcast xs = broadcast_from(r, x, t);
      xs.work->wait();
      at::Tensor part_w = at::matmul(xs.block.t(), dy);
      WorkHandle reduce_w = c.reduce(part_w, static_cast<int>(t));
      reduce_x->wait();
      reduce_w->wait();
      if (r.rank() == t) dx = part_x;
      if (c.rank() == t) dw = part_w;
    }
    return {dx, dw, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor summa_linear(Communicator& row, Communicator& column, const at::Tensor& x_block,
                        const at::Tensor& w_block) {
  if (row.size() != column.size() || x_block.dim() != 2 || w_block.dim() != 2 || x_block.size(1) != w_block.size(0))
    throw InputError("runtime",
                     "SUMMA on a " + std::to_string(row.size()) + " x " + std::to_string(column.size()) +
                         " grid with blocks " + c10::str(x_block.sizes()) + " and " + c10::str(w_block.sizes()),
                     "summa_linear", "a q x q grid and blocks [rows/q, k/q] x [k/q, n/q]");
  return SummaFn::apply(x_block.contiguous(), w_block.contiguous(), to_handle(&row), to_handle(&column));
}

}  // namespace axonn::runtime
