// The MPI backend; see axonn/runtime/mpi_communicator.hpp.
#include "axonn/runtime/mpi_communicator.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "axonn/common/error.hpp"
#include "axonn/common/ring_collectives.hpp"
#include "axonn/runtime/idle_wait.hpp"
#include "axonn/runtime/mpi_ring.hpp"

namespace axonn::runtime {

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  prefer_ring_collectives();  // the collectives the performance model describes
  AXONN_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided_));
  finalize_ = true;
  AXONN_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
}

MpiEnvironment::~MpiEnvironment() {
  if (finalize_) MPI_Finalize();
}

namespace {

// bf16 on MPI, which has no such type: a 2-byte datatype and sum and max operators of
// our own (each pair added in fp32 and rounded to nearest even, as LibTorch's bf16 add).
template <class Combine>
void bf16_combine(void* in, void* inout, int* len, Combine combine) {
  const auto* a = static_cast<const c10::BFloat16*>(in);
  auto* b = static_cast<c10::BFloat16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = c10::BFloat16(combine(static_cast<float>(a[i]), static_cast<float>(b[i])));
}
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_combine(in, inout, len, [](float x, float y) { return x + y; });
}
void bf16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_combine(in, inout, len, [](float x, float y) { return std::max(x, y); });
}

class Bf16Mpi {
 public:
  Bf16Mpi() {
    AXONN_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &type_));
    AXONN_CHECK(MPI_Type_commit(&type_));
    AXONN_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &sum_));
    AXONN_CHECK(MPI_Op_create(&bf16_max, /*commute=*/1, &max_));
  }
  ~Bf16Mpi() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;  // MPI_Finalize freed them
    MPI_Op_free(&max_);
    MPI_Op_free(&sum_);
    MPI_Type_free(&type_);
  }
  Bf16Mpi(const Bf16Mpi&) = delete;
  Bf16Mpi& operator=(const Bf16Mpi&) = delete;
  MPI_Datatype type() const { return type_; }
  MPI_Op op(ReduceOp op) const { return op == ReduceOp::Sum ? sum_ : max_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  MPI_Op sum_ = MPI_OP_NULL, max_ = MPI_OP_NULL;
};

const Bf16Mpi& bf16_mpi() {
  static const Bf16Mpi b;  // created on first use, after MPI_Init
  return b;
}

MPI_Datatype mpi_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kBFloat16: return bf16_mpi().type();
    case at::kLong: return MPI_INT64_T;
    case at::kInt: return MPI_INT32_T;
    case at::kByte: return MPI_UINT8_T;
    default:
      throw InternalError("comm", std::string("unsupported tensor type ") + at::toString(t.scalar_type()),
                  rank_and_host(), "float32, float64, bfloat16, int32 or int64");
  }
}

MPI_Op mpi_op(ReduceOp op, const at::Tensor& t) {
  if (t.scalar_type() == at::kBFloat16) return bf16_mpi().op(op);
  return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX;
}

// Uneven chunks in MPI's terms: int counts and their total, elements.
struct Chunks {
  std::vector<int> counts;
  int64_t total = 0;
};
Chunks mpi_chunks(const std::vector<int64_t>& counts) {
  Chunks c;
  for (int64_t n : counts) {
    AXONN_ASSERT(n >= 0 && c.total + n <= std::numeric_limits<int>::max());
    c.counts.push_back(static_cast<int>(n));
    c.total += n;
  }
  return c;
}

void require_contiguous_cpu(const at::Tensor& t, const char* what) {
  if (!t.is_contiguous() || !t.device().is_cpu())
    throw InternalError("comm", std::string(what) + " tensor is not a contiguous CPU tensor", rank_and_host(),
                "a contiguous CPU tensor for the MPI backend");
  if (t.numel() > std::numeric_limits<int>::max())
    throw InternalError("comm", std::string(what) + " tensor of " + std::to_string(t.numel()) + " elements", rank_and_host(),
                "at most 2^31-1 elements per MPI call");
}

std::atomic<int64_t> g_timeout_ms{0};  // the watchdog's (set_completion_timeout); 0: none

// The buffers of operations given up on by the watchdog: MPI may still write them, and
// a pending nonblocking collective can be neither completed nor freed, so they live on
// until the job ends (which it does: axrun aborts on the error).
void bury(std::vector<at::Tensor> buffers) {
  static std::mutex m;
  static auto* graveyard = new std::vector<std::vector<at::Tensor>>();  // never freed, on purpose
  std::lock_guard<std::mutex> lock(m);
  graveyard->push_back(std::move(buffers));
}

// What every operation's Work shares: the buffers it keeps alive until MPI is done with
// them, and the watchdog that gives it up past the deadline, saying which group hangs.
class WatchedWork : public Work {
 protected:
  WatchedWork(std::vector<at::Tensor> keep, const char* what, std::shared_ptr<const std::string> group)
      : keep_(std::move(keep)), what_(what), group_(std::move(group)), issued_(std::chrono::steady_clock::now()) {}

  bool past_deadline() const {
    const int64_t limit_ms = g_timeout_ms.load(std::memory_order_relaxed);
    return limit_ms > 0 && std::chrono::steady_clock::now() - issued_ >= std::chrono::milliseconds(limit_ms);
  }
  // The buffers go to the graveyard (MPI may still write them).
  void bury_buffers() { bury(std::move(keep_)); }
  // Past the deadline, with the operation's requests already dropped: throws.
  [[noreturn]] void give_up() {
    bury_buffers();
    const int64_t limit_ms = g_timeout_ms.load(std::memory_order_relaxed);
    throw CommError("comm",
                    fmt::format("{} on communicator {} did not complete within {:.1f} s of being issued", what_, *group_,
                                static_cast<double>(limit_ms) / 1000.0),
                    rank_and_host(),
                    "every rank of the communicator to reach it: one of them hangs or died (axrun --collective-timeout)");
  }

 private:
  std::vector<at::Tensor> keep_;
  const char* what_;
  std::shared_ptr<const std::string> group_;  // "data (world ranks 0, 2)"
  std::chrono::steady_clock::time_point issued_;
};

// Posts the next step of every ring in flight whose step has completed (RingWork);
// `wait_for_registry` false: skipped when another thread is at it. Returns how many
// rings this call completed.
int progress_rings(bool wait_for_registry);

// How a rank waits: a test loop that also moves this rank's rings in flight on, since a
// ring moves only when advanced and a peer may be waiting for this rank's next step of
// one while this rank waits for something else. Between empty polls it gives the core
// away as the process's wait policy says (idle_wait.hpp).
template <class Done>
void wait_moving_rings(Done&& done) {
  IdleWait idle(collective_wait_kind());
  while (!done()) {
    if (progress_rings(false) > 0) idle.restart();  // a ring moved: a new wait for its next step
    else idle.pause();
  }
}

// One MPI request.
class MpiWork final : public WatchedWork {
 public:
  MpiWork(std::initializer_list<at::Tensor> keep, const char* what, std::shared_ptr<const std::string> group)
      : WatchedWork(keep, what, std::move(group)) {}
  ~MpiWork() override {
    // A request must complete before its buffers go away; with the watchdog on, only
    // until its deadline (another operation's error is unwinding the stack, and the job
    // is about to end).
    if (request_ == MPI_REQUEST_NULL) return;
    wait_moving_rings([&] {
      int done = 0;
      if (MPI_Test(&request_, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) return true;
      if (!past_deadline()) return false;
      bury_buffers();
      return true;
    });
  }
  void wait() override {
    wait_moving_rings([&] { return test(); });  // test() throws past the deadline
  }
  bool test() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    AXONN_CHECK(MPI_Test(&request_, &done, MPI_STATUS_IGNORE));
    if (!done && past_deadline()) {
      request_ = MPI_REQUEST_NULL;
      give_up();
    }
    return done != 0;
  }
  MPI_Request* request() { return &request_; }

 private:
  MPI_Request request_ = MPI_REQUEST_NULL;
};

class RingWork;

// A ring over `comm`, its first step posted; `in` and `out` of one element type.
std::unique_ptr<MpiRing> start_ring(MpiRing::Kind kind, const at::Tensor& in, const at::Tensor& out,
                                    std::vector<int> counts, MPI_Comm comm, int tag) {
  AXONN_ASSERT(in.scalar_type() == out.scalar_type());
  const MPI_Op op = kind == MpiRing::Kind::ReduceScatter ? mpi_op(ReduceOp::Sum, in) : MPI_OP_NULL;
  return std::make_unique<MpiRing>(kind, in.data_ptr(), out.data_ptr(), std::move(counts), mpi_type(in), op, comm, tag);
}

// The rings in flight, which the progress thread advances (MpiProgressThread).
struct RingRegistry {
  std::mutex mutex;
  std::vector<RingWork*> works;
};
RingRegistry& ring_registry() {
  static auto* r = new RingRegistry();  // never destroyed: the progress thread may outlive statics
  return *r;
}

// A ring all-gather or reduce-scatter (mpi_ring.hpp): advanced by whoever tests or waits
// for it, and by the progress thread between those calls.
class RingWork final : public WatchedWork {
 public:
  // An all-gather of `in` into `out`, or a reduce-scatter (sum) of `in` into `out`.
  RingWork(MpiRing::Kind kind, const char* what, std::shared_ptr<const std::string> group, const at::Tensor& in,
           const at::Tensor& out, std::vector<int> counts, MPI_Comm comm, int tag)
      : WatchedWork({in, out}, what, std::move(group)),
        ring_(start_ring(kind, in, out, std::move(counts), comm, tag)) {
    if (ring_->done()) return;
    std::lock_guard<std::mutex> lock(ring_registry().mutex);
    ring_registry().works.push_back(this);
  }
  ~RingWork() override {
    {
      std::lock_guard<std::mutex> lock(ring_registry().mutex);
      auto& w = ring_registry().works;
      w.erase(std::remove(w.begin(), w.end(), this), w.end());
    }
    if (!ring_ || ring_->done()) return;
    // As MpiWork's: complete before the buffers go, or give up at the deadline, or on
    // an MPI failure (another error is unwinding the stack; the job is ending).
    bool failed = error_ != nullptr;
    if (!failed) try {
        wait_moving_rings([&] { return ring_->advance() || past_deadline(); });
      } catch (const std::exception&) {
        failed = true;
      }
    if (failed || !ring_->done()) {
      abandon_ring();
      bury_buffers();
    }
  }
  void wait() override {
    wait_moving_rings([&] { return test(); });  // test() throws past the deadline
  }
  bool test() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_) std::rethrow_exception(error_);
    if (!ring_ || ring_->advance()) return true;
    if (past_deadline()) {
      abandon_ring();
      give_up();
    }
    return false;
  }
  // Another thread's turn (the progress thread's, or a wait's for another operation):
  // skipped while an owner is testing it. True when this call completed the ring.
  bool progress() {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock || error_ || !ring_ || ring_->done()) return false;
    try {
      return ring_->advance();
    } catch (...) {
      error_ = std::current_exception();  // rethrown by the owner's next test()
      return false;
    }
  }

 private:
  // Its posted messages are forgotten and the ring with its buffers leaked on purpose:
  // MPI may still write them, and the job is about to end.
  void abandon_ring() {
    ring_->abandon();
    static_cast<void>(ring_.release());
  }

  std::mutex mutex_;
  std::unique_ptr<MpiRing> ring_;
  std::exception_ptr error_;
};

int progress_rings(bool wait_for_registry) {
  RingRegistry& r = ring_registry();
  std::unique_lock<std::mutex> lock(r.mutex, std::defer_lock);
  if (wait_for_registry) lock.lock();
  else if (!lock.try_lock()) return 0;
  int completed = 0;
  for (RingWork* w : r.works) completed += w->progress() ? 1 : 0;
  return completed;
}

}  // namespace

MpiProgressThread::MpiProgressThread(std::chrono::microseconds interval) {
  int level = 0;
  AXONN_CHECK(MPI_Query_thread(&level));
  if (level < MPI_THREAD_MULTIPLE) return;
  AXONN_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
  thread_ = std::thread([this, interval] {
    while (!stop_.load(std::memory_order_relaxed)) {
      int flag = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, MPI_STATUS_IGNORE);  // runs MPI's progress engine
      // and posts the next step of each ring whose step has completed
      rings_completed_.fetch_add(progress_rings(true), std::memory_order_relaxed);
      std::this_thread::sleep_for(interval);
    }
  });
}

MpiProgressThread::~MpiProgressThread() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

void set_completion_timeout(std::chrono::milliseconds timeout) {
  g_timeout_ms.store(std::max<int64_t>(0, timeout.count()), std::memory_order_relaxed);
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned, std::string name)
    : comm_(comm), owned_(owned), name_(std::move(name)) {
  AXONN_CHECK(MPI_Comm_rank(comm_, &rank_));
  AXONN_CHECK(MPI_Comm_size(comm_, &size_));
  AXONN_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  AXONN_CHECK(MPI_Comm_dup(comm_, &ring_comm_));  // the rings' messages apart from send/recv's
  // Its members' world ranks, for the watchdog's message.
  MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  AXONN_CHECK(MPI_Comm_group(comm_, &mine));
  AXONN_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  std::vector<int> local(static_cast<size_t>(size_)), global(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) local[static_cast<size_t>(r)] = r;
  AXONN_CHECK(MPI_Group_translate_ranks(mine, size_, local.data(), world, global.data()));
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  described_ = std::make_shared<const std::string>(fmt::format("{} (world ranks {})", name_, fmt::join(global, ", ")));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (ring_comm_ != MPI_COMM_NULL) MPI_Comm_free(&ring_comm_);
  if (owned_ && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

int MpiCommunicator::next_ring_tag() {
  // Every member issues its collectives in the same order, so the n-th ring has tag n
  // everywhere; rings in flight at once (far fewer than this) never share one.
  constexpr uint32_t kTags = 32768;  // MPI_TAG_UB is at least 32767
  return static_cast<int>(ring_rounds_.fetch_add(1, std::memory_order_relaxed) % kTags);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, false, "world");
}

WorkHandle MpiCommunicator::all_reduce(at::Tensor t, ReduceOp op) {
  require_contiguous_cpu(t, "all_reduce");
  auto w = std::make_unique<MpiWork>(std::initializer_list<at::Tensor>{t}, "all_reduce", described_);
  AXONN_CHECK(MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), static_cast<int>(t.numel()), mpi_type(t),
                                 mpi_op(op, t), comm_, w->request()));
  return w;
}

WorkHandle MpiCommunicator::all_gather(at::Tensor in, at::Tensor out) {
  require_contiguous_cpu(in, "all_gather input");
  require_contiguous_cpu(out, "all_gather output");
  AXONN_ASSERT(out.numel() == in.numel() * size_);
  return std::make_unique<RingWork>(MpiRing::Kind::AllGather, "all_gather", described_, in, out,
                                    std::vector<int>(static_cast<size_t>(size_), static_cast<int>(in.numel())),
                                    ring_comm_, next_ring_tag());
}

WorkHandle MpiCommunicator::reduce_scatter(at::Tensor in, at::Tensor out) {
  require_contiguous_cpu(in, "reduce_scatter input");
  require_contiguous_cpu(out, "reduce_scatter output");
  AXONN_ASSERT(in.numel() == out.numel() * size_);
  return std::make_unique<RingWork>(MpiRing::Kind::ReduceScatter, "reduce_scatter", described_, in, out,
                                    std::vector<int>(static_cast<size_t>(size_), static_cast<int>(out.numel())),
                                    ring_comm_, next_ring_tag());
}

WorkHandle MpiCommunicator::reduce_scatter_v(at::Tensor in, const std::vector<int64_t>& counts, at::Tensor out) {
  require_contiguous_cpu(in, "reduce_scatter_v input");
  require_contiguous_cpu(out, "reduce_scatter_v output");
  AXONN_ASSERT(static_cast<int>(counts.size()) == size_ && out.numel() == counts[static_cast<size_t>(rank_)]);
  Chunks c = mpi_chunks(counts);
  AXONN_ASSERT(in.numel() == c.total);
  return std::make_unique<RingWork>(MpiRing::Kind::ReduceScatter, "reduce_scatter_v", described_, in, out,
                                    std::move(c.counts), ring_comm_, next_ring_tag());
}

WorkHandle MpiCommunicator::all_gather_v(at::Tensor in, const std::vector<int64_t>& counts, at::Tensor out) {
  require_contiguous_cpu(in, "all_gather_v input");
  require_contiguous_cpu(out, "all_gather_v output");
  AXONN_ASSERT(static_cast<int>(counts.size()) == size_ && in.numel() == counts[static_cast<size_t>(rank_)]);
  Chunks c = mpi_chunks(counts);
  AXONN_ASSERT(out.numel() == c.total);
  return std::make_unique<RingWork>(MpiRing::Kind::AllGather, "all_gather_v", described_, in, out,
                                    std::move(c.counts), ring_comm_, next_ring_tag());
}

WorkHandle MpiCommunicator::broadcast(at::Tensor t, int root) {
  require_contiguous_cpu(t, "broadcast");
  auto w = std::make_unique<MpiWork>(std::initializer_list<at::Tensor>{t}, "broadcast", described_);
  AXONN_CHECK(MPI_Ibcast(t.data_ptr(), static_cast<int>(t.numel()), mpi_type(t), root, comm_, w->request()));
  return w;
}

WorkHandle MpiCommunicator::reduce(at::Tensor t, int root) {
  require_contiguous_cpu(t, "reduce");
  auto w = std::make_unique<MpiWork>(std::initializer_list<at::Tensor>{t}, "reduce", described_);
  const bool at_root = rank_ == root;
  AXONN_CHECK(MPI_Ireduce(at_root ? MPI_IN_PLACE : t.data_ptr(), at_root ? t.data_ptr() : nullptr,
                          static_cast<int>(t.numel()), mpi_type(t), mpi_op(ReduceOp::Sum, t), root, comm_, w->request()));
  return w;
}

WorkHandle MpiCommunicator::send(at::Tensor t, int peer, int tag) {
  require_contiguous_cpu(t, "send");
  auto w = std::make_unique<MpiWork>(std::initializer_list<at::Tensor>{t}, "send", described_);
  AXONN_CHECK(MPI_Isend(t.data_ptr(), static_cast<int>(t.numel()), mpi_type(t), peer, tag, comm_, w->request()));
  return w;
}

WorkHandle MpiCommunicator::recv(at::Tensor t, int peer, int tag) {
  require_contiguous_cpu(t, "recv");
  auto w = std::make_unique<MpiWork>(std::initializer_list<at::Tensor>{t}, "recv", described_);
  AXONN_CHECK(MPI_Irecv(t.data_ptr(), static_cast<int>(t.numel()), mpi_type(t), peer, tag, comm_, w->request()));
  return w;
}

void MpiCommunicator::barrier() {
  MpiWork w({}, "barrier", described_);
  AXONN_CHECK(MPI_Ibarrier(comm_, w.request()));
  w.wait();
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key, const std::string& name) {
  MPI_Comm sub = MPI_COMM_NULL;
  AXONN_CHECK(MPI_Comm_split(comm_, color, key, &sub));
  return std::make_unique<MpiCommunicator>(sub, true, name);
}

}  // namespace axonn::runtime
