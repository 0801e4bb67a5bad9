// One submitted execution: a future-like handle returned by ModelRunner::ExecuteAsync.
//
// Ownership: shared. The caller holds one reference; the runner holds another while the
// request is queued or running, so dropping the handle early is safe. The request owns the
// output buffers the runner allocated; caller buffers (inputs and given outputs) are only
// pointed to and must stay valid until Done(). A runner recycles a request (its vectors and
// output buffers) once nobody but the runner's pool holds it, so steady-state requests
// allocate nothing.
// Thread safety: Done/Wait/WaitFor/error/outputs/timing may be called from any thread; outputs,
// error and timing are meaningful once Done() is true. The rest is private to the runner (the
// device thread mutates progress fields; nothing else touches them).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/base/aligned_buffer.h"
#include "tf_popef_op/runtime/cc/base/dtype.h"
#include "tf_popef_op/runtime/cc/base/error.h"

namespace tfpopef {

class Request {
 public:
  struct Output {
    int anchor = -1;
    std::string name;  // the anchor's name (not an alias)
    DType dtype = DType::kFloat32;
    std::vector<int64_t> shape;
    void* data = nullptr;
    size_t nbytes = 0;
    bool runner_allocated = false;  // false: the caller's buffer
  };

  // Where the request's time went, from steady_clock reads by the runner (one at enqueue and
  // four per batch, so measuring costs the hot path next to nothing). Every request of a
  // shared batch gets that batch's input/infer/output times; a request whose rows ran in
  // several batches sums them. Times are steady_clock nanoseconds.
  struct Timing {
    int64_t enqueued_ns = 0;  // handed to the queues
    int64_t started_ns = 0;   // its first batch started: it left the queue (0: it never ran)
    int64_t done_ns = 0;      // completed
    int64_t input_ns = 0;     // its batches' inputs gathered (rows copied into staging buffers)
    int64_t infer_ns = 0;     // its batches' Main program runs
    int64_t output_ns = 0;    // its batches' outputs scattered back to the requests
    int batches = 0;          // batches that held its rows

    // Waiting in the queues, including the wait for more rows to fill its first batch.
    int64_t queue_ns() const { return (started_ns != 0 ? started_ns : done_ns) - enqueued_ns; }
    int64_t total_ns() const { return done_ns - enqueued_ns; }
  };

  int subgraph() const { return subgraph_; }
  // Rows along the batch axis (1 for a subgraph that only takes its exact compiled shapes).
  int64_t rows() const { return rows_; }

  bool Done() const { return done_.load(std::memory_order_acquire); }
  // Spins up to `spin_ns` (then sleeps) when the result is expected soon: a short request is
  // collected without a futex wake-up and context switch.
  void Wait(int64_t spin_ns = 0) const;
  // false if not done after `timeout`.
  bool WaitFor(std::chrono::nanoseconds timeout) const;
  // After Done(): the failure, or nullptr on success.
  const Error* error() const { return error_ ? &*error_ : nullptr; }
  // After Done(): throws the failure, if any.
  void ThrowIfFailed() const {
    if (error_) throw *error_;
  }
  // Every output of the subgraph, in its order.
  const std::vector<Output>& outputs() const { return outputs_; }
  const Timing& timing() const { return timing_; }

 private:
  friend class ModelRunner;
  void Complete(std::optional<Error> error, int64_t done_ns);
  // Back to the state of a new request, keeping the capacity of its vectors and buffers.
  void Reset();

  int subgraph_ = 0;
  int64_t rows_ = 0;
  std::vector<void*> inputs_;  // caller data, in SubgraphBatching::inputs order
  std::vector<Output> outputs_;
  std::vector<AlignedBuffer> owned_;  // runner-allocated outputs
  void* index_data_ = nullptr;        // caller's fusion index tensor, if any
  std::vector<int> queue_ids_;        // queues used: inputs, outputs, then the fusion index
  std::vector<void*> queue_data_;     // the data pushed on each of those queues
  std::function<void(const Request&)> on_done_;

  // Device thread only.
  std::vector<void*> bound_;  // data of the popped queue entries, in queue_ids_ order
  int64_t rows_taken_ = 0;    // rows placed into batches
  int64_t rows_done_ = 0;     // rows whose batch ran
  Timing timing_;             // enqueued_ns is set by the submitting thread before it queues
  std::shared_ptr<Request> self_;  // keeps the request alive while the runner owns it

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable std::atomic<int> sleepers_{0};  // threads blocked in Wait/WaitFor (Complete skips notify when 0)
  std::atomic<bool> done_{false};
  std::optional<Error> error_;
};

}  // namespace tfpopef
