#include "fast_infer.h"

#include <chrono>
#include <cstring>
#include <optional>

#include "tf_popef_op/runtime/cc/base/aligned_buffer.h"

namespace tfpopef {
namespace kserve {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

grpc::StatusCode GrpcCode(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorCode::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case ErrorCode::kFailedPrecondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case ErrorCode::kDeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case ErrorCode::kUnimplemented: return grpc::StatusCode::UNIMPLEMENTED;
    case ErrorCode::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorCode::kDataLoss: return grpc::StatusCode::DATA_LOSS;
    case ErrorCode::kInternal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

// Element count of `dims`, or nullopt if a dimension is negative or the bytes overflow.
std::optional<int64_t> ElementCount(const google::protobuf::RepeatedField<int64_t>& dims, size_t itemsize) {
  int64_t count = 1, bytes = static_cast<int64_t>(itemsize);
  for (int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(count, d, &count) || __builtin_mul_overflow(bytes, d, &bytes))
      return std::nullopt;
  }
  return count;
}

// A request's inputs as runtime tensors: views of `raw_input_contents`, or copies in `owned`
// when a raw buffer is not aligned for its dtype or the rows are zero-padded to whole compiled
// batches (a subgraph that runs each request alone).
struct BoundInputs {
  std::vector<HostTensor> tensors;
  std::vector<AlignedBuffer> owned;
  int64_t rows = -1;         // along the batch axis (-1: exact shapes)
  int64_t run_rows = -1;     // rows the runtime runs (rows, or padded up)
  int64_t counted_rows = 1;  // inferences for the statistics: the first input's rows
};

void* OwnedCopy(BoundInputs& bound, const void* data, size_t nbytes, size_t capacity) {
  bound.owned.emplace_back(capacity, /*zeroed=*/capacity > nbytes);
  std::memcpy(bound.owned.back().data(), data, nbytes);
  return bound.owned.back().data();
}

// false: the fast path does not take this request.
bool BindInputs(const ServedModel& model, const inference::ModelInferRequest& request, BoundInputs& bound) {
  const int n = request.inputs_size();
  if (n != static_cast<int>(model.inputs.size()) || request.raw_input_contents_size() != n) return false;
  bound.tensors.reserve(model.feeds.size() + static_cast<size_t>(n));
  for (const Feed& f : model.feeds)
    bound.tensors.push_back(HostTensor{f.anchor, f.dtype, f.shape, const_cast<char*>(f.data.data())});
  std::vector<bool> seen(model.inputs.size(), false);
  for (int i = 0; i < n; ++i) {
    const inference::ModelInferRequest::InferInputTensor& t = request.inputs(i);
    if (t.has_contents() || !t.parameters().empty()) return false;
    size_t k = 0;
    while (k < model.inputs.size() && model.inputs[k].name != t.name()) ++k;
    if (k == model.inputs.size() || seen[k]) return false;
    seen[k] = true;
    const TensorSpec& spec = model.inputs[k];
    if (t.datatype() != V2Datatype(spec.dtype) || t.shape_size() != static_cast<int>(spec.shape.size())) return false;
    for (int d = 0; d < t.shape_size(); ++d)
      if (spec.shape[d] >= 0 && spec.shape[d] != t.shape(d)) return false;
    const size_t itemsize = DTypeSize(spec.dtype);
    const std::optional<int64_t> count = ElementCount(t.shape(), itemsize);
    if (!count) return false;
    const std::string& raw = request.raw_input_contents(i);
    const uint64_t nbytes = static_cast<uint64_t>(*count) * itemsize;
    if (raw.size() != nbytes || (model.max_tensor_bytes && nbytes > static_cast<uint64_t>(model.max_tensor_bytes)))
      return false;
    if (model.batch_axis >= 0) {
      const int64_t r = t.shape(model.batch_axis);
      if (i == 0) bound.counted_rows = r;
      if (bound.rows >= 0 && r != bound.rows) return false;  // the runtime's own error: Python answers it
      bound.rows = r;
    }
    void* data = const_cast<char*>(raw.data());
    if (reinterpret_cast<uintptr_t>(data) % itemsize != 0) data = OwnedCopy(bound, raw.data(), raw.size(), raw.size());
    bound.tensors.push_back(HostTensor{spec.anchor, spec.dtype, {t.shape().begin(), t.shape().end()}, data});
  }
  if (model.batch_axis < 0) return true;
  if (bound.rows <= 0 || (model.max_batch_size && bound.rows > model.max_batch_size)) return false;
  bound.run_rows = bound.rows;
  if (!model.pack_requests && bound.rows % model.batch_size != 0) {
    // Whole compiled batches run as they are: zero rows fill the last one. Rows are
    // contiguous only along the first axis; other axes go to the Python path.
    if (model.batch_axis != 0) return false;
    bound.run_rows = (bound.rows + model.batch_size - 1) / model.batch_size * model.batch_size;
    for (size_t j = model.feeds.size(); j < bound.tensors.size(); ++j) {
      HostTensor& tensor = bound.tensors[j];
      const size_t row_bytes = request.raw_input_contents(static_cast<int>(j - model.feeds.size())).size() /
                               static_cast<size_t>(bound.rows);
      tensor.data = OwnedCopy(bound, tensor.data, row_bytes * static_cast<size_t>(bound.rows),
                              row_bytes * static_cast<size_t>(bound.run_rows));
      tensor.shape[0] = bound.run_rows;
    }
  }
  return true;
}

// Indices into model.outputs of the outputs to answer, in the order the request names them
// (each once), or all; false if the request names an output the model does not have.
bool WantedOutputs(const ServedModel& model, const inference::ModelInferRequest& request, std::vector<size_t>& wanted) {
  if (request.outputs_size() == 0) {
    for (size_t k = 0; k < model.outputs.size(); ++k) wanted.push_back(k);
    return true;
  }
  for (const auto& o : request.outputs()) {
    if (!o.parameters().empty()) return false;
    size_t k = 0;
    while (k < model.outputs.size() && model.outputs[k].name != o.name()) ++k;
    if (k == model.outputs.size()) return false;
    bool repeated = false;
    for (size_t w : wanted) repeated |= w == k;
    if (!repeated) wanted.push_back(k);
  }
  return true;
}

}  // namespace

FastResult FastInfer(const ServedModel& model, const inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response, grpc::Status* status, size_t max_message_chars) {
  const int64_t start = NowNs();
  if (!request.parameters().empty()) return FastResult::kDelegate;
  BoundInputs bound;
  std::vector<size_t> wanted;
  if (!BindInputs(model, request, bound) || !WantedOutputs(model, request, wanted)) return FastResult::kDelegate;

  std::shared_ptr<Request> run;
  try {
    run = model.runner->ExecuteAsync(bound.tensors);
  } catch (const Error&) {
    return FastResult::kDelegate;  // refused before it ran: the Python path names the problem
  }
  run->Wait(model.runner->config().spin_ns);
  Counters& c = *model.counters;
  const auto finished = [&c, start] {
    c.last_inference_ms.store(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch()).count());
    return static_cast<uint64_t>(NowNs() - start);
  };
  const auto fail = [&](grpc::Status failure) {
    response->Clear();
    *status = std::move(failure);
    c.fail.fetch_add(1, std::memory_order_relaxed);
    c.fail_by_code[static_cast<int>(status->error_code())].fetch_add(1, std::memory_order_relaxed);
    c.fail_ns.fetch_add(finished(), std::memory_order_relaxed);
    return FastResult::kAnswered;
  };
  if (const Error* error = run->error()) {
    std::string message = error->what();
    if (message.size() > max_message_chars) message = message.substr(0, max_message_chars) + "...[truncated]";
    return fail(grpc::Status(GrpcCode(error->code()), message));
  }

  response->set_model_name(request.model_name());
  response->set_model_version(model.version);
  response->set_id(request.id());
  const std::vector<Request::Output>& outputs = run->outputs();
  for (size_t k : wanted) {
    const TensorSpec& spec = model.outputs[k];
    const Request::Output* out = nullptr;
    for (const Request::Output& o : outputs)
      if (o.name == spec.anchor) out = &o;
    if (out == nullptr)  // the registration named an anchor the runner does not have
      return fail(grpc::Status(grpc::StatusCode::INTERNAL, "output anchor '" + spec.anchor + "' of model '" +
                                                               model.model + "' is missing from the runtime's answer"));
    auto* tensor = response->add_outputs();
    tensor->set_name(spec.name);
    tensor->set_datatype(V2Datatype(out->dtype));
    std::vector<int64_t> shape = out->shape;
    size_t nbytes = out->nbytes;
    if (bound.run_rows != bound.rows && spec.shape[0] == -1) {  // padded: the request's rows only
      nbytes = nbytes / static_cast<size_t>(shape[0]) * static_cast<size_t>(bound.rows);
      shape[0] = bound.rows;
    }
    for (int64_t d : shape) tensor->add_shape(d);
    response->add_raw_output_contents()->assign(static_cast<const char*>(out->data), nbytes);
  }
  *status = grpc::Status::OK;

  const Request::Timing& t = run->timing();
  c.success.fetch_add(1, std::memory_order_relaxed);
  c.rows.fetch_add(static_cast<uint64_t>(bound.counted_rows), std::memory_order_relaxed);
  c.queue_ns.fetch_add(static_cast<uint64_t>(t.queue_ns()), std::memory_order_relaxed);
  c.input_ns.fetch_add(static_cast<uint64_t>(t.input_ns), std::memory_order_relaxed);
  c.infer_ns.fetch_add(static_cast<uint64_t>(t.infer_ns), std::memory_order_relaxed);
  c.output_ns.fetch_add(static_cast<uint64_t>(t.output_ns), std::memory_order_relaxed);
  c.success_ns.fetch_add(finished(), std::memory_order_relaxed);
  return FastResult::kAnswered;
}

}  // namespace kserve
}  // namespace tfpopef
