// Operator collectives; see axonn/runtime/operator_comm.hpp.
#include "axonn/runtime/operator_comm.hpp"

namespace axonn::runtime {

template <class Issue>
OperatorComm::InFlight OperatorComm::issue(Communicator& c, plan::CollectiveKind kind, Issue&& start) {
  InFlight f;
  f.kind = kind;
  if (c.size() == 1) return f;
  f.issued_at = tracer_ ? tracer_->now() : 0;
  f.work = start();
  return f;
}

OperatorComm::InFlight OperatorComm::issue_all_reduce(Communicator& c, const at::Tensor& t, plan::CollectiveKind kind,
                                                      ReduceOp op) {
  return issue(c, kind, [&] { return c.all_reduce(t, op); });
}

OperatorComm::InFlight OperatorComm::issue_all_gather(Communicator& c, const at::Tensor& in, const at::Tensor& out,
                                                      plan::CollectiveKind kind) {
  if (c.size() == 1) out.view(in.sizes()).copy_(in);
  return issue(c, kind, [&] { return c.all_gather(in, out); });
}

OperatorComm::InFlight OperatorComm::issue_reduce_scatter(Communicator& c, const at::Tensor& in,
                                                          const at::Tensor& out, plan::CollectiveKind kind) {
  if (c.size() == 1) out.view(in.sizes()).copy_(in);
  return issue(c, kind, [&] { return c.reduce_scatter(in, out); });
}

OperatorComm::InFlight OperatorComm::issue_broadcast(Communicator& c, const at::Tensor& t, int root,
                                                     plan::CollectiveKind kind) {
  return issue(c, kind, [&] { return c.broadcast(t, root); });
}

OperatorComm::InFlight OperatorComm::issue_reduce(Communicator& c, const at::Tensor& t, int root,
                                                  plan::CollectiveKind kind) {
  return issue(c, kind, [&] { return c.reduce(t, root); });
}

void OperatorComm::wait(InFlight& f) {
  if (!f.work) return;
  const double t0 = tracer_ ? tracer_->now() : 0;
  f.work->wait();
  if (tracer_) {
    const double t1 = tracer_->now();
    tracer_->comm(f.kind, f.issued_at, t1, t1 - t0);
  }
  f.work.reset();
}

void OperatorComm::all_reduce(Communicator& c, const at::Tensor& t, plan::CollectiveKind kind, ReduceOp op) {
  InFlight f = issue_all_reduce(c, t, kind, op);
  wait(f);
}

}  // namespace axonn::runtime
