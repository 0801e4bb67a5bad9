// The public facade of the runtime: loads a PopEF, picks a device, and serves requests.
//
// A ModelRunner builds an Executable, acquires a Device from the DeviceManager, binds them in
// a Session (loading the executable), sets up a QueueManager and starts one device thread
// that drains the queues. ExecuteAsync validates a request in the caller's thread (so every
// error is immediate and names the anchor, expected and got), queues it and returns a
// Request handle. The device thread cuts requests into compiled batches (SubgraphBatching):
// - batching off: a request of N x b rows runs N times, never waiting for other requests;
// - RuntimeConfig::batching_dim set: rows of consecutive requests for the same subgraph are
//   packed into shared batches; a batch waits at most timeout_ns after its first row for more
//   rows, then runs zero-padded; exactly the requested rows are returned.
// A batch that is one request's contiguous rows binds the caller's buffers directly; other
// batches gather rows into staging buffers allocated once, and scatter outputs back.
// A failed batch fails every request in it; the runner keeps serving.
// Each request records its Request::Timing: queued, left the queue (its first batch started),
// the gather / run / scatter time of its batches, completed.
// Steady state allocates nothing: Request objects (with their vectors and runner-allocated
// output buffers) are recycled from a small pool once only the pool holds them, validation
// builds no strings unless it fails, and the device thread reuses its tables.
//
// Ownership: owns the Executable (shared), Session, QueueManager, staging memory and the
// device thread; holds one runner slot on its Device until Close().
// Thread safety: ExecuteAsync/Execute may be called from many threads when
// config.thread_safe (else from one thread at a time); stats() from any thread. Close() (also
// run by the destructor) stops the device thread; requests not yet run fail with
// kFailedPrecondition.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tf_popef_op/runtime/cc/base/host_tensor.h"
#include "tf_popef_op/runtime/cc/core/device.h"
#include "tf_popef_op/runtime/cc/core/executable.h"
#include "tf_popef_op/runtime/cc/core/queue_manager.h"
#include "tf_popef_op/runtime/cc/core/request.h"
#include "tf_popef_op/runtime/cc/core/runtime_config.h"
#include "tf_popef_op/runtime/cc/core/session.h"
#include "tf_popef_op/runtime/cc/core/subgraph_batching.h"

namespace tfpopef {

struct RunnerStats {
  uint64_t requests = 0;               // accepted requests
  uint64_t rows = 0;                   // rows of accepted requests
  uint64_t failed_requests = 0;        // completed with an error (kernel error or close)
  uint64_t batches_run = 0;            // Main program runs
  uint64_t padded_rows = 0;            // zero rows added to fill compiled batches
  uint64_t zero_copy_batches = 0;      // ran on the caller's buffers
  uint64_t staged_batches = 0;         // ran on staging buffers (gather/scatter)
  uint64_t multi_request_batches = 0;  // batches holding rows of several requests
};

class ModelRunner {
 public:
  using DoneCallback = std::function<void(const Request&)>;

  ModelRunner(std::shared_ptr<const PopefReader> popef, const RuntimeConfig& config = RuntimeConfig());
  static std::unique_ptr<ModelRunner> FromFile(const std::string& path, const RuntimeConfig& config = RuntimeConfig());
  static std::unique_ptr<ModelRunner> FromBuffer(const void* data, size_t size,
                                                 const RuntimeConfig& config = RuntimeConfig());
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;
  ~ModelRunner();

  // Validates and queues a request. `inputs` name anchors (or aliases) of the selected
  // subgraph (plus `index` when fused); `outputs` optionally give caller buffers for some
  // outputs (exact dtype and shape), the others are allocated. Throws Error on any bad input.
  // `on_done` runs on the device thread once the request completes.
  std::shared_ptr<Request> ExecuteAsync(const std::vector<HostTensor>& inputs,
                                        const std::vector<HostTensor>& outputs = {},
                                        DoneCallback on_done = nullptr);
  // ExecuteAsync + Wait; throws the request's error.
  std::shared_ptr<Request> Execute(const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& outputs = {});

  // Per-op profile of the Main program runs since the last reset, while profiling was on
  // (RuntimeConfig::profile or set_profiling).
  SessionProfile Profile() const { return session_->Profile(); }
  void ResetProfile() { session_->ResetProfile(); }
  void set_profiling(bool on) { session_->set_profiling(on); }
  bool profiling() const { return session_->profiling(); }
  const Session& session() const { return *session_; }

  const Executable& executable() const { return *exe_; }
  const RuntimeConfig& config() const { return config_; }
  const Device& device() const { return *device_; }
  const SubgraphBatching& batching(int subgraph) const { return plans_.at(static_cast<size_t>(subgraph)); }
  RunnerStats stats() const;

  void Close();
  bool closed() const { return closed_.load(); }

 private:
  struct Segment {
    Request* request;
    int64_t src_row;  // first row in the request
    int64_t count;
    int64_t dst_row;  // first row in the batch
  };

  // Where each anchor is in the caller's inputs / outputs (-1: not given).
  struct GivenAnchors {
    std::vector<int> in, out;
  };

  // Checks a request against the executable and binds it to a pooled Request, in the steps
  // below; throws kInvalidArgument naming the anchor and what is wrong. Allocates nothing
  // when the request is valid.
  std::shared_ptr<Request> Validate(const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& outputs);
  // Each given name is a known anchor (or alias) of the right direction, given once.
  void ResolveAnchorNames(const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& outputs,
                          GivenAnchors& given) const;
  // The subgraph to run: 0, or for a fused executable the value of its index input (which must
  // be an integer scalar in range); `index_data` gets that input's data (null if none).
  int SelectSubgraph(const std::vector<HostTensor>& inputs, const GivenAnchors& given, void** index_data) const;
  // The request gives the subgraph's inputs, and (validate_io_params) no other subgraph's anchors.
  void CheckAnchorsOfSubgraph(int subgraph, const GivenAnchors& given) const;
  // Dtypes, shapes and a batch size all inputs agree on; the inputs' data pointers go into
  // `request`. Returns the request's number of rows.
  int64_t BindInputs(int subgraph, const std::vector<HostTensor>& inputs, const GivenAnchors& given,
                     Request& request) const;
  // The caller's output buffers (checked against the shapes for `rows`), or owned ones.
  void BindOutputs(int subgraph, const std::vector<HostTensor>& outputs, const GivenAnchors& given, int64_t rows,
                   Request& request) const;
  // "the model", or "subgraph N ('name')" for a fused executable (for messages).
  std::string SubgraphLabel(int subgraph) const;
  // A reset request from the pool (or a new one when every pooled request is in use).
  std::shared_ptr<Request> AcquireRequest();
  void DeviceLoop();
  Request* PopNext();
  void RunBatch(const SubgraphBatching& plan, const std::vector<Segment>& segments, int64_t filled, Request** current);
  // Completes `r` at steady_clock time `now_ns` (its Timing::done_ns).
  void Finish(Request* r, std::optional<Error> error, int64_t now_ns);

  const RuntimeConfig config_;
  std::shared_ptr<const Executable> exe_;
  std::vector<SubgraphBatching> plans_;
  Device* device_ = nullptr;
  std::unique_ptr<Session> session_;
  std::unique_ptr<QueueManager> queues_;
  std::vector<int> anchor_queue_;                      // anchor -> queue id
  std::vector<std::vector<AlignedBuffer>> staging_;    // [subgraph][inputs..., outputs...]
  std::vector<AlignedBuffer> index_values_;            // [subgraph]: the index in its compiled dtype
  std::vector<void*> bindings_;                        // anchor -> buffer, device thread only

  static constexpr size_t kRequestPoolSize = 16;
  std::mutex pool_mu_;
  std::vector<std::shared_ptr<Request>> pool_;  // requests the runner may recycle
  size_t pool_next_ = 0;                        // where the next search starts

  std::thread thread_;
  std::mutex close_mu_;
  std::atomic<bool> closed_{false};

  struct AtomicStats {
    std::atomic<uint64_t> requests{0}, rows{0}, failed_requests{0}, batches_run{0}, padded_rows{0},
        zero_copy_batches{0}, staged_batches{0}, multi_request_batches{0};
  } stats_;
};

}  // namespace tfpopef
