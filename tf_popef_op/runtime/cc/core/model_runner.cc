#include "tf_popef_op/runtime/cc/core/model_runner.h"

#include <algorithm>
#include <cstring>

#include "tf_popef_op/runtime/cc/core/device_manager.h"

namespace tfpopef {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

std::string QuotedList(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + Quote(n);
  return s;
}

[[noreturn]] void Invalid(const std::string& what) { throw Error(ErrorCode::kInvalidArgument, what); }

void WriteInteger(DType dtype, int64_t v, void* p) {
  switch (dtype) {
    case DType::kInt8: *static_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
    case DType::kInt16: *static_cast<int16_t*>(p) = static_cast<int16_t>(v); break;
    case DType::kInt32: *static_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
    case DType::kInt64: *static_cast<int64_t*>(p) = v; break;
    case DType::kUInt8: *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
    case DType::kUInt16: *static_cast<uint16_t*>(p) = static_cast<uint16_t>(v); break;
    case DType::kUInt32: *static_cast<uint32_t*>(p) = static_cast<uint32_t>(v); break;
    case DType::kUInt64: *static_cast<uint64_t*>(p) = static_cast<uint64_t>(v); break;
    default: break;
  }
}

// Same as TensorDesc{dtype, shape}.nbytes() without copying the shape (no allocation).
size_t ShapeBytes(DType dtype, const std::vector<int64_t>& shape) {
  size_t n = DTypeSize(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

}  // namespace

ModelRunner::ModelRunner(std::shared_ptr<const PopefReader> popef, const RuntimeConfig& config)
    : config_(config), exe_(Executable::Create(std::move(popef))) {
  if (config_.ring_buffer_size_multiplier < 1)
    Invalid("RuntimeConfig.ring_buffer_size_multiplier must be at least 1, got " +
            std::to_string(config_.ring_buffer_size_multiplier));
  if (config_.timeout_ns < 0) Invalid("RuntimeConfig.timeout_ns must be >= 0, got " + std::to_string(config_.timeout_ns));
  if (config_.spin_ns < 0) Invalid("RuntimeConfig.spin_ns must be >= 0, got " + std::to_string(config_.spin_ns));
  const auto& subgraphs = exe_->subgraphs();
  for (size_t s = 0; s < subgraphs.size(); ++s)
    plans_.push_back(SubgraphBatching::Plan(*exe_, static_cast<int>(s), config_));

  device_ = &DeviceManager::Get().Acquire(*exe_, config_.device_id);
  try {
    session_ = std::make_unique<Session>(exe_, *device_);
    session_->set_profiling(config_.profile);
    session_->Load();

    // One queue per anchor, sized by the batch of the subgraph it belongs to: the compiled batch
    // when an anchor carries the batch axis (the parser checked it against that anchor's shape),
    // else 1, so a declared batch that no shape backs never sizes an allocation.
    const size_t mult = config_.ring_buffer_size_multiplier;
    const auto& anchors = exe_->anchors();
    auto rows = [&anchors](const Subgraph& sg) -> size_t {
      for (const auto* list : {&sg.inputs, &sg.outputs})
        for (int a : *list)
          if (anchors[a].batch_axis >= 0) return static_cast<size_t>(std::max<int64_t>(sg.batch_size, 1));
      return 1;
    };
    std::vector<QueueManager::QueueSpec> specs;
    size_t max_capacity = 1;
    for (const Subgraph& sg : subgraphs) max_capacity = std::max(max_capacity, mult * rows(sg));
    for (size_t a = 0; a < anchors.size(); ++a) {
      const int s = anchors[a].subgraph;
      const size_t capacity = s >= 0 ? mult * rows(subgraphs[s]) : max_capacity;
      anchor_queue_.push_back(static_cast<int>(specs.size()));
      specs.push_back({anchors[a].name, capacity});
    }
    queues_ = std::make_unique<QueueManager>(std::move(specs), max_capacity, config_.thread_safe, config_.spin_ns);

    for (const SubgraphBatching& plan : plans_) {
      std::vector<AlignedBuffer> buffers;
      if (plan.batched && (plan.batch > 1 || !plan.contiguous)) {
        for (const auto* list : {&plan.inputs, &plan.outputs})
          for (const AnchorLayout& l : *list) buffers.emplace_back(anchors[l.anchor].desc.nbytes(), true);
      }
      staging_.push_back(std::move(buffers));
      AlignedBuffer index(8, true);
      if (exe_->fused()) WriteInteger(anchors[exe_->index_anchor()].desc.dtype, plan.subgraph, index.data());
      index_values_.push_back(std::move(index));
    }
    bindings_.assign(anchors.size(), nullptr);
    // A synchronous caller needs two requests: the one it submits and the previous one, which
    // the device thread may still hold for a moment after completing it. Both are used in turn
    // (AcquireRequest searches round-robin), so both are warm after a few calls.
    pool_.reserve(kRequestPoolSize);
    for (int i = 0; i < 2; ++i) pool_.push_back(std::make_shared<Request>());
    thread_ = std::thread([this] { DeviceLoop(); });
  } catch (...) {
    DeviceManager::Get().Release(*device_);
    throw;
  }
}

std::unique_ptr<ModelRunner> ModelRunner::FromFile(const std::string& path, const RuntimeConfig& config) {
  return std::make_unique<ModelRunner>(PopefReader::OpenFile(path), config);
}

std::unique_ptr<ModelRunner> ModelRunner::FromBuffer(const void* data, size_t size, const RuntimeConfig& config) {
  return std::make_unique<ModelRunner>(PopefReader::FromBuffer(data, size), config);
}

ModelRunner::~ModelRunner() { Close(); }

void ModelRunner::Close() {
  std::lock_guard<std::mutex> l(close_mu_);
  if (closed_.exchange(true)) return;
  queues_->Close();
  if (thread_.joinable()) thread_.join();
  // The device thread is gone, so this thread is now the only consumer; once no producer is
  // mid-Enqueue, everything ever accepted is either completed or still queued here.
  queues_->WaitForProducers();
  while (queues_->Front() != nullptr)
    Finish(PopNext(), Error(ErrorCode::kFailedPrecondition, "ModelRunner closed before the request ran"), NowNs());
  DeviceManager::Get().Release(*device_);
}

RunnerStats ModelRunner::stats() const {
  RunnerStats s;
  s.requests = stats_.requests.load();
  s.rows = stats_.rows.load();
  s.failed_requests = stats_.failed_requests.load();
  s.batches_run = stats_.batches_run.load();
  s.padded_rows = stats_.padded_rows.load();
  s.zero_copy_batches = stats_.zero_copy_batches.load();
  s.staged_batches = stats_.staged_batches.load();
  s.multi_request_batches = stats_.multi_request_batches.load();
  return s;
}

std::shared_ptr<Request> ModelRunner::Execute(const std::vector<HostTensor>& inputs,
                                              const std::vector<HostTensor>& outputs) {
  auto request = ExecuteAsync(inputs, outputs);
  request->Wait(config_.spin_ns);
  request->ThrowIfFailed();
  return request;
}

std::shared_ptr<Request> ModelRunner::ExecuteAsync(const std::vector<HostTensor>& inputs,
                                                   const std::vector<HostTensor>& outputs, DoneCallback on_done) {
  if (closed_.load()) throw Error(ErrorCode::kFailedPrecondition, "ModelRunner is closed");
  std::shared_ptr<Request> request = Validate(inputs, outputs);
  request->on_done_ = std::move(on_done);
  thread_local std::vector<QueueEntry> entries;  // keeps its capacity: no allocation per request
  entries.clear();
  const size_t n_in = request->inputs_.size();
  for (size_t i = 0; i < request->queue_ids_.size(); ++i) {
    void* data = i < n_in ? request->inputs_[i]
                 : i < n_in + request->outputs_.size() ? request->outputs_[i - n_in].data
                                                        : request->index_data_;
    entries.push_back(QueueEntry{data, request->rows_, request.get()});
  }
  request->self_ = request;
  request->timing_.enqueued_ns = NowNs();
  if (!queues_->Enqueue(request.get(), request->queue_ids_.data(), entries.data(), entries.size())) {
    request->self_.reset();
    throw Error(ErrorCode::kFailedPrecondition, "ModelRunner is closed");
  }
  stats_.requests.fetch_add(1, std::memory_order_relaxed);
  stats_.rows.fetch_add(static_cast<uint64_t>(request->rows_), std::memory_order_relaxed);
  return request;
}

std::shared_ptr<Request> ModelRunner::AcquireRequest() {
  {
    std::lock_guard<std::mutex> l(pool_mu_);
    for (size_t k = 0; k < pool_.size(); ++k) {
      const size_t i = (pool_next_ + k) % pool_.size();
      // Only the pool holds it: nobody can take a new reference, so it is free to recycle.
      if (pool_[i].use_count() == 1) {
        // use_count() is a relaxed load; pair it with the last owner's release.
        std::atomic_thread_fence(std::memory_order_acquire);
        pool_next_ = i + 1;
        pool_[i]->Reset();
        return pool_[i];
      }
    }
    if (pool_.size() < kRequestPoolSize) {
      pool_.push_back(std::make_shared<Request>());
      return pool_.back();
    }
  }
  return std::make_shared<Request>();  // all pooled requests busy: a one-off
}

std::shared_ptr<Request> ModelRunner::Validate(const std::vector<HostTensor>& inputs,
                                               const std::vector<HostTensor>& outputs) {
  // Per calling thread, keeping their capacity: no allocation per request.
  thread_local GivenAnchors given;
  ResolveAnchorNames(inputs, outputs, given);
  void* index_data = nullptr;
  const int s = SelectSubgraph(inputs, given, &index_data);
  CheckAnchorsOfSubgraph(s, given);
  std::shared_ptr<Request> request = AcquireRequest();
  request->subgraph_ = s;
  request->index_data_ = index_data;
  const int64_t rows = BindInputs(s, inputs, given, *request);
  request->rows_ = rows;
  BindOutputs(s, outputs, given, rows, *request);
  const SubgraphBatching& plan = plans_[s];
  for (const auto* list : {&plan.inputs, &plan.outputs})
    for (const AnchorLayout& l : *list) request->queue_ids_.push_back(anchor_queue_[l.anchor]);
  if (exe_->index_anchor() >= 0) request->queue_ids_.push_back(anchor_queue_[exe_->index_anchor()]);
  return request;
}

void ModelRunner::ResolveAnchorNames(const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& outputs,
                                     GivenAnchors& given) const {
  const auto& anchors = exe_->anchors();
  given.in.assign(anchors.size(), -1);
  given.out.assign(anchors.size(), -1);
  std::vector<std::string> unknown;
  auto resolve = [&](const std::vector<HostTensor>& tensors, bool as_input) {
    std::vector<int>& positions = as_input ? given.in : given.out;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const std::string& name = tensors[i].name;
      const int a = exe_->FindAnchor(name);
      if (a < 0) {
        unknown.push_back(name);
        continue;
      }
      if (anchors[a].is_input != as_input)
        Invalid(Quote(name) + " is an " + (anchors[a].is_input ? "input" : "output") + " anchor; pass it in " +
                (anchors[a].is_input ? "inputs" : "outputs"));
      if (positions[a] >= 0)
        Invalid("anchor " + Quote(anchors[a].name) + " is given twice (as " + Quote(tensors[positions[a]].name) +
                " and " + Quote(name) + ")");
      positions[a] = static_cast<int>(i);
    }
  };
  resolve(inputs, true);
  resolve(outputs, false);
  if (!unknown.empty()) {
    std::vector<std::string> in_names, out_names;
    for (const Anchor& a : anchors) (a.is_input ? in_names : out_names).push_back(a.name);
    Invalid("unknown anchor name" + std::string(unknown.size() > 1 ? "s " : " ") + QuotedList(unknown) +
            " (inputs: " + QuotedList(in_names) + "; outputs: " + QuotedList(out_names) + ")");
  }
}

int ModelRunner::SelectSubgraph(const std::vector<HostTensor>& inputs, const GivenAnchors& given,
                                void** index_data) const {
  const int index_anchor = exe_->index_anchor();
  if (index_anchor < 0) return 0;
  const auto& subgraphs = exe_->subgraphs();
  const Anchor& ia = exe_->anchors()[index_anchor];
  const std::string range = "0.." + std::to_string(subgraphs.size() - 1);
  if (given.in[index_anchor] < 0)
    Invalid("missing input " + Quote(ia.name) + ": this fused executable needs it to select the subgraph (" + range + ")");
  const HostTensor& t = inputs[given.in[index_anchor]];
  if (!IsInteger(t.dtype))
    Invalid("input " + Quote(ia.name) + ": expected an integer dtype, got " + DTypeName(t.dtype));
  if (!(t.shape.empty() || (t.shape.size() == 1 && t.shape[0] == 1)))
    Invalid("input " + Quote(ia.name) + ": expected shape [] or [1], got " + ShapeToString(t.shape));
  if (t.data == nullptr) Invalid("input " + Quote(ia.name) + " has no data");
  bool ok;
  const int64_t value = ReadIntegerScalar(t.dtype, t.data, &ok);
  if (!ok || value < 0 || value >= static_cast<int64_t>(subgraphs.size()))
    Invalid(ia.name + " " + (ok ? std::to_string(value) : std::to_string(*static_cast<const uint64_t*>(t.data))) +
            " out of range: the executable has " + std::to_string(subgraphs.size()) + " subgraphs (" + range + ")");
  *index_data = t.data;
  return static_cast<int>(value);
}

std::string ModelRunner::SubgraphLabel(int subgraph) const {
  return exe_->fused() ? "subgraph " + std::to_string(subgraph) + " (" + Quote(exe_->subgraphs()[subgraph].name) + ")"
                       : std::string("the model");
}

void ModelRunner::CheckAnchorsOfSubgraph(int subgraph, const GivenAnchors& given) const {
  const auto& anchors = exe_->anchors();
  const Subgraph& sg = exe_->subgraphs()[subgraph];
  std::vector<std::string> missing, foreign;
  for (int a : sg.inputs)
    if (given.in[a] < 0) missing.push_back(anchors[a].name);
  for (size_t a = 0; a < anchors.size(); ++a) {
    if (static_cast<int>(a) == exe_->index_anchor()) continue;
    const bool own_in = std::find(sg.inputs.begin(), sg.inputs.end(), static_cast<int>(a)) != sg.inputs.end();
    const bool own_out = std::find(sg.outputs.begin(), sg.outputs.end(), static_cast<int>(a)) != sg.outputs.end();
    if ((given.in[a] >= 0 && !own_in) || (given.out[a] >= 0 && !own_out)) foreign.push_back(anchors[a].name);
  }
  if (config_.validate_io_params && (!missing.empty() || !foreign.empty())) {
    std::string msg = "the request does not match the anchors of " + SubgraphLabel(subgraph) + ":";
    if (!missing.empty()) msg += " missing input" + std::string(missing.size() > 1 ? "s " : " ") + QuotedList(missing) + ";";
    if (!foreign.empty())
      msg += " not anchors of this subgraph: " + QuotedList(foreign) +
             " (set validate_io_params=False to ignore anchors of other subgraphs);";
    msg.pop_back();
    Invalid(msg);
  }
  if (!missing.empty())
    Invalid("missing input" + std::string(missing.size() > 1 ? "s " : " ") + QuotedList(missing) + " of " +
            SubgraphLabel(subgraph));
}

int64_t ModelRunner::BindInputs(int subgraph, const std::vector<HostTensor>& inputs, const GivenAnchors& given,
                                Request& request) const {
  const auto& anchors = exe_->anchors();
  const SubgraphBatching& plan = plans_[subgraph];
  // Messages are only built on failure (the success path allocates nothing).
  auto shape_hint = [&] {
    return " (" + SubgraphLabel(subgraph) + " accepts only its compiled shapes: " + plan.exact_reason + ")";
  };
  int64_t rows = -1;
  int rows_from = -1;  // the anchor that set `rows`
  for (const AnchorLayout& l : plan.inputs) {
    const Anchor& a = anchors[l.anchor];
    const HostTensor& t = inputs[given.in[l.anchor]];
    auto what = [&] { return "input " + Quote(a.name); };
    if (t.dtype != a.desc.dtype)
      Invalid(what() + ": expected dtype " + DTypeName(a.desc.dtype) + ", got " + DTypeName(t.dtype));
    if (!plan.batched) {
      if (t.shape != a.desc.shape)
        Invalid(what() + ": expected shape " + ShapeToString(a.desc.shape) + ", got " + ShapeToString(t.shape) + shape_hint());
    } else {
      bool ok = t.shape.size() == a.desc.shape.size();
      for (size_t d = 0; ok && d < t.shape.size(); ++d) ok = static_cast<int>(d) == l.axis || t.shape[d] == a.desc.shape[d];
      if (!ok)
        Invalid(what() + ": expected shape " + ShapeToString(a.desc.shape) + " (any size along batch axis " +
                std::to_string(l.axis) + "), got " + ShapeToString(t.shape));
      const int64_t n = t.shape[l.axis];
      if (n < 1)
        Invalid(what() + ": batch size " + std::to_string(n) + " along axis " + std::to_string(l.axis) +
                "; expected at least 1");
      if (!plan.dynamic && n % plan.batch != 0)
        Invalid(what() + ": batch size " + std::to_string(n) + " along axis " + std::to_string(l.axis) +
                " is not a multiple of the compiled batch size " + std::to_string(plan.batch) + " (got shape " +
                ShapeToString(t.shape) + ", compiled " + ShapeToString(a.desc.shape) +
                "); set RuntimeConfig.batching_dim to accept any batch size");
      if (rows < 0) {
        rows = n;
        rows_from = l.anchor;
      } else if (n != rows) {
        Invalid("inputs disagree on the batch size along axis " + std::to_string(l.axis) + ": " +
                Quote(anchors[rows_from].name) +
                " has " + std::to_string(rows) + ", " + Quote(a.name) + " has " + std::to_string(n));
      }
    }
    if (t.data == nullptr && ShapeBytes(t.dtype, t.shape) > 0) Invalid(what() + " has no data");
    request.inputs_.push_back(t.data);
  }
  if (!plan.batched) return 1;
  return rows < 0 ? plan.batch : rows;  // no inputs: one compiled batch
}

void ModelRunner::BindOutputs(int subgraph, const std::vector<HostTensor>& outputs, const GivenAnchors& given,
                              int64_t rows, Request& request) const {
  const auto& anchors = exe_->anchors();
  const SubgraphBatching& plan = plans_[subgraph];
  // Rewritten in place (a recycled request keeps its strings, shapes and buffers).
  request.outputs_.resize(plan.outputs.size());
  if (request.owned_.size() < plan.outputs.size()) request.owned_.resize(plan.outputs.size());
  for (size_t k = 0; k < plan.outputs.size(); ++k) {
    const AnchorLayout& l = plan.outputs[k];
    const Anchor& a = anchors[l.anchor];
    Request::Output& out = request.outputs_[k];
    out.anchor = l.anchor;
    out.name = a.name;
    out.dtype = a.desc.dtype;
    out.shape.assign(a.desc.shape.begin(), a.desc.shape.end());
    if (plan.batched && l.axis >= 0) out.shape[l.axis] = rows;
    out.nbytes = ShapeBytes(out.dtype, out.shape);
    out.runner_allocated = false;
    if (given.out[l.anchor] >= 0) {
      const HostTensor& t = outputs[given.out[l.anchor]];
      if (t.dtype != out.dtype || t.shape != out.shape)
        Invalid("output " + Quote(a.name) + ": expected " + DTypeName(out.dtype) + " " + ShapeToString(out.shape) +
                " for this request, got " + DTypeName(t.dtype) + " " + ShapeToString(t.shape));
      if (t.data == nullptr && out.nbytes > 0) Invalid("output " + Quote(a.name) + " has no data");
      out.data = t.data;
    } else {
      AlignedBuffer& buffer = request.owned_[k];
      if (buffer.size() != out.nbytes) buffer.Resize(out.nbytes);
      out.data = buffer.data();
      out.runner_allocated = true;
    }
  }
}

Request* ModelRunner::PopNext() {
  auto* r = static_cast<Request*>(queues_->PopRequest());
  r->bound_.clear();
  for (int q : r->queue_ids_) r->bound_.push_back(queues_->PopEntry(q).data);
  return r;
}

void ModelRunner::Finish(Request* r, std::optional<Error> error, int64_t now_ns) {
  std::shared_ptr<Request> keep = std::move(r->self_);  // may be the last reference
  if (error) stats_.failed_requests.fetch_add(1, std::memory_order_relaxed);
  r->Complete(std::move(error), now_ns);
}

void ModelRunner::DeviceLoop() {
  const Error closed_error(ErrorCode::kFailedPrecondition, "ModelRunner closed before the request ran");
  const auto timeout = std::chrono::nanoseconds(config_.timeout_ns);
  Request* current = nullptr;  // popped request with rows not yet placed in a batch
  std::vector<Segment> segments;
  segments.reserve(64);
  while (!queues_->closed()) {
    if (current == nullptr) {
      if (queues_->WaitFront(Clock::time_point::max()) == nullptr) break;  // closed
      if (queues_->closed()) break;
      current = PopNext();
    }
    const SubgraphBatching& plan = plans_[current->subgraph_];
    const int64_t b = plan.batch;
    segments.clear();
    int64_t filled = 0;
    const Clock::time_point deadline = Clock::now() + timeout;
    while (true) {
      const int64_t take = std::min(current->rows_ - current->rows_taken_, b - filled);
      segments.push_back(Segment{current, current->rows_taken_, take, filled});
      current->rows_taken_ += take;
      filled += take;
      if (current->rows_taken_ == current->rows_) current = nullptr;
      if (filled == b) break;
      if (current == nullptr) {
        if (!plan.dynamic) break;
        // Pack the next request for the same subgraph, waiting until the deadline for it.
        void* next = queues_->WaitFront(deadline);
        if (next == nullptr || queues_->closed()) break;
        if (static_cast<Request*>(next)->subgraph_ != plan.subgraph) break;  // it starts the next batch
        current = PopNext();
      }
    }
    if (queues_->closed()) {
      const int64_t now = NowNs();
      for (const Segment& seg : segments)
        if (seg.request != current) Finish(seg.request, closed_error, now);
      break;
    }
    RunBatch(plan, segments, filled, &current);
  }
  if (current != nullptr) Finish(current, closed_error, NowNs());
}

void ModelRunner::RunBatch(const SubgraphBatching& plan, const std::vector<Segment>& segments, int64_t filled,
                           Request** current) {
  const int64_t started = NowNs();  // the batch's requests leave the queue
  const int64_t b = plan.batch;
  const bool zero_copy = segments.size() == 1 && filled == b && plan.contiguous;
  const size_t n_in = plan.inputs.size();
  std::vector<AlignedBuffer>& staging = staging_[plan.subgraph];
  if (zero_copy) {
    const Segment& seg = segments[0];
    for (size_t k = 0; k < n_in + plan.outputs.size(); ++k) {
      const AnchorLayout& l = k < n_in ? plan.inputs[k] : plan.outputs[k - n_in];
      bindings_[l.anchor] = static_cast<uint8_t*>(seg.request->bound_[k]) + seg.src_row * l.row_bytes;
    }
  } else {
    for (size_t k = 0; k < n_in; ++k) {
      const AnchorLayout& l = plan.inputs[k];
      uint8_t* dst = staging[k].data();
      for (const Segment& seg : segments) {
        const auto* src = static_cast<const uint8_t*>(seg.request->bound_[k]);
        for (int64_t o = 0; o < l.outer; ++o)
          std::memcpy(dst + (o * b + seg.dst_row) * l.row_bytes, src + (o * seg.request->rows_ + seg.src_row) * l.row_bytes,
                      seg.count * l.row_bytes);
      }
      if (filled < b)
        for (int64_t o = 0; o < l.outer; ++o)
          std::memset(dst + (o * b + filled) * l.row_bytes, 0, (b - filled) * l.row_bytes);
      bindings_[l.anchor] = dst;
    }
    for (size_t k = 0; k < plan.outputs.size(); ++k) bindings_[plan.outputs[k].anchor] = staging[n_in + k].data();
  }
  if (exe_->fused()) bindings_[exe_->index_anchor()] = index_values_[plan.subgraph].data();

  const int64_t inputs_ready = NowNs();
  std::optional<Error> failure;
  try {
    session_->Run(plan.subgraph, bindings_.data());
  } catch (const Error& e) {
    failure = e;
  } catch (const std::exception& e) {
    failure = Error(ErrorCode::kInternal, e.what());
  }
  const int64_t ran = NowNs();
  // Unbind: the caller's buffers may be freed once its request completes.
  for (const auto* list : {&plan.inputs, &plan.outputs})
    for (const AnchorLayout& l : *list) bindings_[l.anchor] = nullptr;

  stats_.batches_run.fetch_add(1, std::memory_order_relaxed);
  stats_.padded_rows.fetch_add(static_cast<uint64_t>(b - filled), std::memory_order_relaxed);
  (zero_copy ? stats_.zero_copy_batches : stats_.staged_batches).fetch_add(1, std::memory_order_relaxed);
  if (segments.size() > 1) stats_.multi_request_batches.fetch_add(1, std::memory_order_relaxed);

  auto account = [&](int64_t outputs_ready) {
    for (const Segment& seg : segments) {
      Request::Timing& t = seg.request->timing_;
      if (t.batches++ == 0) t.started_ns = started;
      t.input_ns += inputs_ready - started;
      t.infer_ns += ran - inputs_ready;
      t.output_ns += outputs_ready - ran;
    }
  };
  if (failure) {
    account(ran);
    for (const Segment& seg : segments) {
      if (seg.request == *current) *current = nullptr;  // its remaining rows are dropped
      Finish(seg.request, failure, ran);
    }
    return;
  }
  if (!zero_copy) {
    for (size_t k = 0; k < plan.outputs.size(); ++k) {
      const AnchorLayout& l = plan.outputs[k];
      const uint8_t* src = staging[n_in + k].data();
      for (const Segment& seg : segments) {
        auto* dst = static_cast<uint8_t*>(seg.request->bound_[n_in + k]);
        for (int64_t o = 0; o < l.outer; ++o)
          std::memcpy(dst + (o * seg.request->rows_ + seg.src_row) * l.row_bytes, src + (o * b + seg.dst_row) * l.row_bytes,
                      seg.count * l.row_bytes);
      }
    }
  }
  const int64_t outputs_ready = NowNs();
  account(outputs_ready);
  for (const Segment& seg : segments) {
    seg.request->rows_done_ += seg.count;
    if (seg.request->rows_done_ == seg.request->rows_) Finish(seg.request, std::nullopt, outputs_ready);
  }
}

}  // namespace tfpopef
