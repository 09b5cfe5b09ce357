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

// Step t's copy of `mine`'s block: member t's of this rank's row (X) or column (W),
// broadcast (mine itself there).
struct Broadcast {
  at::Tensor block;
  SummaMoves::Pending wait;
};
Broadcast broadcast_from(SummaMoves& m, bool row, const at::Tensor& mine, int64_t t) {
  at::Tensor b = (row ? m.row_rank() : m.column_rank()) == t ? mine : at::empty_like(mine);
  return {b, row ? m.broadcast_row(b, t) : m.broadcast_column(b, t)};
}

}  // namespace

at::Tensor summa_forward(SummaMoves& m, const at::Tensor& x, const at::Tensor& w) {
  const int64_t q = m.q();
  at::Tensor y = at::zeros({x.size(0), w.size(1)}, x.options());
  // X_it along the row, W_tj along the column; step t + 1's in flight under step t's matmul.
  Broadcast xs = broadcast_from(m, true, x, 0), ws = broadcast_from(m, false, w, 0);
  for (int64_t t = 0; t < q; ++t) {
    xs.wait();
    ws.wait();
    Broadcast x_next, w_next;
    if (t + 1 < q) x_next = broadcast_from(m, true, x, t + 1), w_next = broadcast_from(m, false, w, t + 1);
    m.multiply(false, [&] { return y.addmm_(xs.block, ws.block); });
    xs = std::move(x_next), ws = std::move(w_next);
  }
  return y;
}

std::pair<at::Tensor, at::Tensor> summa_backward(SummaMoves& m, const at::Tensor& x, const at::Tensor& w,
                                                 const at::Tensor& dy_in) {
  const at::Tensor dy = dy_in.contiguous();
  const int64_t q = m.q();
  at::Tensor dx, dw;
  for (int64_t t = 0; t < q; ++t) {
    // dX_it: this rank's dY_ij W_tj^T, summed over the row at column t.
    Broadcast ws = broadcast_from(m, false, w, t);
    ws.wait();
    at::Tensor part_x = m.multiply(true, [&] { return at::matmul(dy, ws.block.t()); });
    SummaMoves::Pending reduce_x = m.reduce_row(part_x, t);
    // dW_tj: X_it^T dY_ij, summed over the column at row t.
    Broadcast xs = broadcast_from(m, true, x, t);
    xs.wait();
    at::Tensor part_w = m.multiply(true, [&] { return at::matmul(xs.block.t(), dy); });
    SummaMoves::Pending reduce_w = m.reduce_column(part_w, t);
    reduce_x();
    reduce_w();
    if (m.row_rank() == t) dx = part_x;
    if (m.column_rank() == t) dw = part_w;
  }
  return {dx, dw};
}

namespace {

int64_t to_handle(Communicator* c) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(c)); }
Communicator& group_of(const AutogradContext* ctx, const char* key) {
  return *reinterpret_cast<Communicator*>(static_cast<intptr_t>(ctx->saved_data.at(key).toInt()));
}

// The bare operator's moves: the communicators themselves.
class CommunicatorMoves final : public SummaMoves {
 public:
  CommunicatorMoves(Communicator& row, Communicator& column) : row_(row), column_(column) {}
  int64_t q() const override { return row_.size(); }
  int64_t row_rank() const override { return row_.rank(); }
  int64_t column_rank() const override { return column_.rank(); }
  Pending broadcast_row(const at::Tensor& t, int64_t root) override { return pending(row_.broadcast(t, static_cast<int>(root))); }
  Pending broadcast_column(const at::Tensor& t, int64_t root) override {
    return pending(column_.broadcast(t, static_cast<int>(root)));
  }
  Pending reduce_row(const at::Tensor& t, int64_t root) override { return pending(row_.reduce(t, static_cast<int>(root))); }
  Pending reduce_column(const at::Tensor& t, int64_t root) override {
    return pending(column_.reduce(t, static_cast<int>(root)));
  }

 private:
  static Pending pending(WorkHandle w) {
    return [work = std::shared_ptr<Work>(std::move(w))] { work->wait(); };
  }
  Communicator &row_, &column_;
};

struct SummaFn : public torch::autograd::Function<SummaFn> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, at::Tensor w, int64_t row, int64_t column) {
    ctx->saved_data["row"] = row;
    ctx->saved_data["column"] = column;
    CommunicatorMoves moves(group_of(ctx, "row"), group_of(ctx, "column"));
    ctx->save_for_backward({x, w});
    return summa_forward(moves, x, w);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    CommunicatorMoves moves(group_of(ctx, "row"), group_of(ctx, "column"));
    const auto saved = ctx->get_saved_variables();
    auto [dx, dw] = summa_backward(moves, saved[0], saved[1], grads[0]);
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
