// L2L's eager parameter server; see axonn/runtime/parameter_server.hpp.
#include "axonn/runtime/parameter_server.hpp"

#include <c10/util/accumulate.h>

#include <cmath>
#include <utility>

#include "axonn/common/clock.hpp"
#include "axonn/common/error.hpp"
#include "axonn/runtime/host_memory.hpp"

namespace axonn::runtime {

struct ParameterServer::Unit {
  std::vector<Parameter*> params;
  std::vector<std::vector<int64_t>> shapes;  // of each parameter (its device elements are freed between visits)
  std::vector<int64_t> offsets;              // each parameter's first element in the flat buffers
  int64_t elements = 0;
  at::Tensor master, exp_avg, exp_avg_sq, grad;  // host tier, fp32, flat
};

namespace {
at::Tensor no_elements(at::ScalarType t) { return at::empty({0}, at::TensorOptions().dtype(t)); }
}  // namespace

ParameterServer::ParameterServer(Communicator& data, const AdamSettings& adam, double max_grad_norm)
    : group_(data.split(0, data.rank(), "eps")), adam_(adam), max_grad_norm_(max_grad_norm) {}

ParameterServer::~ParameterServer() = default;

int64_t ParameterServer::add_unit(std::vector<Parameter>& params) {
  at::NoGradGuard no_grad;
  auto u = std::make_unique<Unit>();
  if (units_.empty() && !params.empty()) compute_ = params.front().tensor.scalar_type();
  for (auto& p : params) {
    if (p.tensor.scalar_type() != compute_)
      throw InternalError("runtime", "parameter " + p.name + " of another element type", "L2L parameter server",
                          "every parameter in one compute type");
    u->params.push_back(&p);
    u->shapes.push_back(p.tensor.sizes().vec());
    u->offsets.push_back(u->elements);
    u->elements += p.tensor.numel();
  }
  u->master = HostMemory::empty(u->elements, at::kFloat);
  u->exp_avg = HostMemory::zeros(u->elements, at::kFloat);
  u->exp_avg_sq = HostMemory::zeros(u->elements, at::kFloat);
  u->grad = HostMemory::zeros(u->elements, at::kFloat);
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor& t = params[i].tensor;
    u->master.narrow(0, u->offsets[i], t.numel()).copy_(t.detach().reshape({-1}));
    t.set_data(no_elements(compute_));
  }
  units_.push_back(std::move(u));
  return units() - 1;
}

int64_t ParameterServer::unit_elements(int64_t unit) const { return units_.at(static_cast<size_t>(unit))->elements; }

std::vector<at::Tensor> ParameterServer::allocate_on_device(const Unit& u) const {
  std::vector<at::Tensor> out;
  for (const auto& shape : u.shapes) out.push_back(at::empty(shape, at::TensorOptions().dtype(compute_)));
  return out;
}

void ParameterServer::copy_to_device(const Unit& u, std::vector<at::Tensor>& out) {
  at::NoGradGuard no_grad;
  const double t0 = now_s();
  for (size_t i = 0; i < u.params.size(); ++i) out[i].view({-1}).copy_(u.master.narrow(0, u.offsets[i], out[i].numel()));
  std::lock_guard<std::mutex> lock(time_mu_);
  copy_s_ += now_s() - t0;
}

void ParameterServer::prefetch(int64_t unit) {
  AXONN_ASSERT(prefetching_ < 0 && unit >= 0 && unit < units());
  prefetching_ = unit;
  const Unit* u = units_[static_cast<size_t>(unit)].get();
  // The device buffers are allocated here, when the copy is issued, as a CUDA copy
  // stream's destination is: the device memory held at each instruction is then the
  // same on every run, however far the copier has got.
  prefetched_ = allocate_on_device(*u);
  copier_.submit([this, u] { copy_to_device(*u, prefetched_); });
}

void ParameterServer::fetch(int64_t unit) {
  Unit& u = *units_.at(static_cast<size_t>(unit));
  std::vector<at::Tensor> weights;
  const double t0 = now_s();
  if (prefetching_ == unit) {
    copier_.drain();
    weights = std::move(prefetched_);
    prefetched_.clear();
    prefetching_ = -1;
  } else {
    weights = allocate_on_device(u);
    copy_to_device(u, weights);
  }
  fetch_wait_s_ += now_s() - t0;
  for (size_t i = 0; i < u.params.size(); ++i) u.params[i]->tensor.set_data(weights[i]);
}

void ParameterServer::release(int64_t unit) {
  for (Parameter* p : units_.at(static_cast<size_t>(unit))->params) p->tensor.set_data(no_elements(compute_));
}

void ParameterServer::push(int64_t unit) {
  at::NoGradGuard no_grad;
  Unit& u = *units_.at(static_cast<size_t>(unit));
  const double t0 = now_s();
  if (pushed_ == 0) ++step_;
  for (size_t i = 0; i < u.params.size(); ++i) {
    at::Tensor& t = u.params[i]->tensor;
    at::Tensor host = u.grad.narrow(0, u.offsets[i], t.numel());
    if (t.grad().defined()) host.copy_(t.grad().reshape({-1}));
    else host.zero_();  // the unit's parameter took no part in the loss
    t.mutable_grad() = at::Tensor();
    t.set_data(no_elements(compute_));
  }
  const bool last = ++pushed_ == units();
  Unit* up = &u;
  push_s_ += now_s() - t0;
  server_.submit([this, up, last] {
    const double t = now_s();
    reduce(*up);
    if (max_grad_norm_ <= 0) update(*up, 1.0);
    if (last) finish_step_on_server();
    server_s_ += now_s() - t;  // read by the caller only after a drain
  });
}

void ParameterServer::reduce(Unit& u) {
  all_reduce_now(*group_, u.grad);
  // A loop, not tensor arithmetic: an operation that returns a tensor would allocate it
  // on the device tier, from this thread, while the device computes.
  const float* g = u.grad.data_ptr<float>();
  double sum = 0;
  for (int64_t i = 0; i < u.elements; ++i) sum += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  sum_squares_ += sum;
}

void ParameterServer::update(Unit& u, double coef) {
  if (coef < 1.0) u.grad.mul_(coef);
  adam_update(u.master, u.exp_avg, u.exp_avg_sq, u.grad, adam_coefficients(adam_, step_));
}

void ParameterServer::finish_step_on_server() {
  norm_ = std::sqrt(sum_squares_);
  if (max_grad_norm_ > 0) {  // as clip_gradients (optimizer.hpp) and torch::nn::utils::clip_grad_norm_
    const double coef = max_grad_norm_ / (norm_ + 1e-6);
    for (auto& u : units_) update(*u, coef);
  }
  sum_squares_ = 0;
}

double ParameterServer::wait_updates() {
  server_.drain();
  if (pushed_ != 0 && pushed_ != units())
    throw InternalError("runtime", "wait_updates after " + std::to_string(pushed_) + " pushes",
                        "L2L parameter server", "every one of the " + std::to_string(units()) + " units pushed");
  pushed_ = 0;
  return norm_;
}

std::vector<at::Tensor> ParameterServer::master(int64_t unit) const {
  const Unit& u = *units_.at(static_cast<size_t>(unit));
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < u.params.size(); ++i)
    out.push_back(u.master.narrow(0, u.offsets[i], c10::multiply_integers(u.shapes[i])).view(u.shapes[i]));
  return out;
}

std::vector<Parameter> ParameterServer::parameters() const {
  std::vector<Parameter> out;
  for (const auto& u : units_)
    for (const Parameter* p : u->params) out.push_back({p->name, at::Tensor(), p->spec, p->shape});
  return out;
}

TrainingState ParameterServer::state() const {
  TrainingState s;
  s.adam_steps = step_;
  for (const auto& u : units_)
    for (size_t i = 0; i < u->params.size(); ++i) {
      const int64_t n = c10::multiply_integers(u->shapes[i]);
      auto cut = [&](const at::Tensor& flat) { return flat.narrow(0, u->offsets[i], n).view(u->shapes[i]).clone(); };
      ParameterState ps;
      ps.master = cut(u->master);
      ps.weight = ps.master.to(compute_);
      if (compute_ == at::kFloat) ps.master = at::Tensor();  // fp32 weights are their own master
      ps.exp_avg = cut(u->exp_avg);
      ps.exp_avg_sq = cut(u->exp_avg_sq);
      s.params.push_back(std::move(ps));
    }
  return s;
}

void ParameterServer::load_state(const TrainingState& s) {
  at::NoGradGuard no_grad;
  step_ = s.adam_steps;
  size_t k = 0;
  for (auto& u : units_)
    for (size_t i = 0; i < u->params.size(); ++i, ++k) {
      AXONN_ASSERT(k < s.params.size());
      const ParameterState& ps = s.params[k];
      const int64_t n = ps.weight.numel();
      AXONN_ASSERT(u->offsets[i] + n <= u->elements && ps.exp_avg.numel() == n);
      u->master.narrow(0, u->offsets[i], n).copy_(full_precision_weight(ps).reshape({-1}));
      u->exp_avg.narrow(0, u->offsets[i], n).copy_(ps.exp_avg.reshape({-1}));
      u->exp_avg_sq.narrow(0, u->offsets[i], n).copy_(ps.exp_avg_sq.reshape({-1}));
    }
  AXONN_ASSERT(k == s.params.size());
}

double ParameterServer::take_fetch_wait_s() { return std::exchange(fetch_wait_s_, 0.0); }

double ParameterServer::take_push_s() { return std::exchange(push_s_, 0.0); }

double ParameterServer::take_server_s() {
  server_.drain();
  return std::exchange(server_s_, 0.0);
}

double ParameterServer::take_copy_s() {
  std::lock_guard<std::mutex> lock(time_mu_);
  return std::exchange(copy_s_, 0.0);
}

}  // namespace axonn::runtime
