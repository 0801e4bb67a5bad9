// The PopefExecute kernel: hands one call to the IPU emulator runtime, in C++, without
// blocking a TF thread while the device runs.
//
// ComputeAsync validates and queues the request through ModelRunner::ExecuteAsync (so bad
// requests fail at once, in the caller's thread, with the runtime's message naming the anchor)
// and returns; the runner's device thread completes the call through the `done` callback.
// Inputs are passed zero-copy (TF keeps them alive until `done`), and outputs are allocated
// by TF up front with the shapes the runtime will produce and handed to the runtime as the
// request's output buffers, so results are written in place.
//
// The runner comes from SharedRunners: one per PopEF file and configuration per process,
// shared by every kernel instance; each kernel caches the one for the path it last saw.
// Thread safety: ComputeAsync may run concurrently on many threads (the runner is thread safe;
// the cache is guarded by a mutex).
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tf_popef_op/op/cc/kernels/shared_runners.h"
#include "tf_popef_op/op/cc/kernels/tf_dtypes.h"
#include "tf_popef_op/op/cc/kernels/tf_status.h"

namespace tfpopef {
namespace {

using ::tensorflow::AsyncOpKernel;
using ::tensorflow::DataType;
using ::tensorflow::DataTypeVector;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::PartialTensorShape;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;

class PopefExecuteOp : public AsyncOpKernel {
 public:
  explicit PopefExecuteOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    DataTypeVector tin, tout;
    OP_REQUIRES_OK(c, c->GetAttr("Tin", &tin));
    OP_REQUIRES_OK(c, c->GetAttr("Tout", &tout));
    OP_REQUIRES_OK(c, c->GetAttr("input_names", &input_names_));
    OP_REQUIRES_OK(c, c->GetAttr("output_names", &output_names_));
    OP_REQUIRES_OK(c, c->GetAttr("output_shapes", &output_shapes_));
    int64_t batching_dim, timeout_ns, index;
    OP_REQUIRES_OK(c, c->GetAttr("batching_dim", &batching_dim));
    OP_REQUIRES_OK(c, c->GetAttr("timeout_ns", &timeout_ns));
    OP_REQUIRES_OK(c, c->GetAttr("index", &index));
    OP_REQUIRES(c, tin.size() == input_names_.size(),
                absl::InvalidArgumentError("PopefExecute: " + std::to_string(input_names_.size()) +
                                           " input_names for " + std::to_string(tin.size()) + " inputs"));
    OP_REQUIRES(c, tout.size() == output_names_.size() && tout.size() == output_shapes_.size(),
                absl::InvalidArgumentError("PopefExecute: output_names, output_shapes and Tout differ in length"));
    for (size_t i = 0; i < tin.size(); ++i) {
      const auto t = FromTfDataType(tin[i]);
      OP_REQUIRES(c, t.has_value(),
                  absl::InvalidArgumentError("PopefExecute: input '" + input_names_[i] + "' has dtype " +
                                             ::tensorflow::DataTypeString(tin[i]) + ", which PopEF does not support"));
      input_dtypes_.push_back(*t);
    }
    for (size_t i = 0; i < tout.size(); ++i) {
      const auto t = FromTfDataType(tout[i]);
      OP_REQUIRES(c, t.has_value(),
                  absl::InvalidArgumentError("PopefExecute: output '" + output_names_[i] + "' has dtype " +
                                             ::tensorflow::DataTypeString(tout[i]) + ", which PopEF does not support"));
      output_dtypes_.push_back(*t);
    }
    OP_REQUIRES(c, batching_dim >= -1 && batching_dim < RuntimeConfig::kBatchingOff,
                absl::InvalidArgumentError("PopefExecute: batching_dim must be -1 (off) or an axis, got " +
                                           std::to_string(batching_dim)));
    OP_REQUIRES(c, timeout_ns >= 0,
                absl::InvalidArgumentError("PopefExecute: timeout_ns must be >= 0, got " + std::to_string(timeout_ns)));
    OP_REQUIRES(c, index >= -1,
                absl::InvalidArgumentError("PopefExecute: index must be -1 (single model) or a subgraph, got " +
                                           std::to_string(index)));
    config_.batching_dim = batching_dim < 0 ? RuntimeConfig::kBatchingOff : static_cast<uint32_t>(batching_dim);
    config_.timeout_ns = timeout_ns;
    index_ = index;
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& path = ctx->input(0);
    OP_REQUIRES_ASYNC(ctx, ::tensorflow::TensorShapeUtils::IsScalar(path.shape()),
                      absl::InvalidArgumentError("PopefExecute: popef_path must be a scalar, got shape " +
                                                 path.shape().DebugString()),
                      done);
    std::shared_ptr<ModelRunner> runner;
    OP_REQUIRES_OK_ASYNC(ctx, RunnerFor(std::string(path.scalar<::tensorflow::tstring>()()), &runner), done);
    const Executable& exe = runner->executable();

    std::vector<HostTensor> inputs;
    inputs.reserve(input_names_.size() + 1);
    for (size_t i = 0; i < input_names_.size(); ++i) {
      const Tensor& t = ctx->input(static_cast<int>(i) + 1);
      HostTensor h;
      h.name = input_names_[i];
      h.dtype = input_dtypes_[i];
      const auto dims = t.shape().dim_sizes();  // a temporary: keep it while copying
      h.shape.assign(dims.begin(), dims.end());
      h.data = const_cast<char*>(t.tensor_data().data());  // read only: an input of the request
      inputs.push_back(std::move(h));
    }
    if (index_ >= 0) {
      OP_REQUIRES_ASYNC(ctx, exe.fused(),
                        absl::InvalidArgumentError("PopefExecute: index " + std::to_string(index_) + " given, but " +
                                                   exe.source() + " is a single-model PopEF (no 'index' anchor)"),
                        done);
      inputs.push_back(HostTensor{exe.anchors()[exe.index_anchor()].name, DType::kInt64, {}, &index_});
    }

    // Outputs allocated by TF and written in place by the runtime. When the shapes cannot be
    // derived here (the request is malformed), the runtime is called without them and
    // reports what is wrong.
    std::vector<HostTensor> outputs;
    if (std::optional<std::vector<std::vector<int64_t>>> shapes = OutputShapes(*runner, inputs)) {
      for (size_t i = 0; i < shapes->size(); ++i) {
        const std::vector<int64_t>& dims = (*shapes)[i];
        TensorShape shape;
        OP_REQUIRES_OK_ASYNC(ctx, TensorShape::BuildTensorShape(dims, &shape), done);
        Tensor* out = nullptr;
        OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(static_cast<int>(i), shape, &out), done);
        outputs.push_back(HostTensor{output_names_[i], output_dtypes_[i], dims,
                                     const_cast<char*>(out->tensor_data().data())});
      }
    }
    const bool preallocated = !outputs.empty();

    try {
      runner->ExecuteAsync(inputs, outputs, [this, ctx, done, preallocated, exe_ptr = &exe](const Request& r) {
        if (r.error() != nullptr) ctx->SetStatus(ToTfStatus(*r.error()));
        else if (!preallocated) ctx->SetStatus(CopyOutputs(ctx, *exe_ptr, r));
        done();
      });
    } catch (const Error& e) {
      ctx->SetStatus(ToTfStatus(e));
      done();
    } catch (const std::exception& e) {
      ctx->SetStatus(absl::InternalError(std::string("PopefExecute: ") + e.what()));
      done();
    }
  }

 private:
  absl::Status RunnerFor(const std::string& path, std::shared_ptr<ModelRunner>* runner) {
    std::lock_guard<std::mutex> lock(mu_);
    if (runner_ == nullptr || path != runner_path_) {
      try {
        runner_ = SharedRunners::Get(path, config_);
      } catch (const Error& e) {
        return ToTfStatus(e);
      } catch (const std::exception& e) {
        return absl::InternalError(std::string("PopefExecute: ") + path + ": " + e.what());
      }
      runner_path_ = path;
    }
    *runner = runner_;
    return absl::OkStatus();
  }

  // The shapes the runtime will give the requested outputs, or nullopt if the request does
  // not determine them (unknown anchors, missing inputs, bad ranks: the runtime says which)
  // or they differ from output_shapes.
  std::optional<std::vector<std::vector<int64_t>>> OutputShapes(const ModelRunner& runner,
                                                                 const std::vector<HostTensor>& inputs) const {
    const Executable& exe = runner.executable();
    const int64_t s = index_ >= 0 ? index_ : 0;
    if (s >= static_cast<int64_t>(exe.subgraphs().size())) return std::nullopt;
    const SubgraphBatching& plan = runner.batching(static_cast<int>(s));
    int64_t rows = plan.batch;
    if (plan.batched && !plan.inputs.empty()) {
      rows = -1;
      for (const HostTensor& t : inputs) {
        const int a = exe.FindAnchor(t.name);
        if (a == plan.inputs[0].anchor && static_cast<int>(t.shape.size()) > plan.axis) rows = t.shape[plan.axis];
      }
      if (rows < 1) return std::nullopt;
    }
    std::vector<std::vector<int64_t>> shapes;
    for (const std::string& name : output_names_) {
      const int a = exe.FindAnchor(name);
      const AnchorLayout* layout = nullptr;
      for (const AnchorLayout& l : plan.outputs)
        if (l.anchor == a) layout = &l;
      if (layout == nullptr) return std::nullopt;
      shapes.push_back(plan.batched ? layout->ShapeFor(rows) : layout->compiled_shape);
      // Not the declared shape: let the runtime judge the inputs first, CopyOutputs the rest.
      if (!output_shapes_[shapes.size() - 1].IsCompatibleWith(PartialTensorShape(shapes.back()))) return std::nullopt;
    }
    return shapes;
  }

  // Outputs of a request that ran on runner-allocated buffers, copied into TF tensors.
  absl::Status CopyOutputs(OpKernelContext* ctx, const Executable& exe, const Request& r) const {
    for (size_t i = 0; i < output_names_.size(); ++i) {
      const int a = exe.FindAnchor(output_names_[i]);
      const Request::Output* found = nullptr;
      for (const Request::Output& o : r.outputs())
        if (o.anchor == a) found = &o;
      if (found == nullptr)
        return absl::InvalidArgumentError("PopefExecute: '" + output_names_[i] + "' is not an output of subgraph " +
                                          std::to_string(r.subgraph()) + " of " + exe.source());
      if (found->dtype != output_dtypes_[i])
        return absl::InvalidArgumentError("PopefExecute: output '" + output_names_[i] + "' has dtype " +
                                          DTypeName(found->dtype) + ", not " + DTypeName(output_dtypes_[i]));
      if (!output_shapes_[i].IsCompatibleWith(PartialTensorShape(found->shape)))
        return absl::InvalidArgumentError("PopefExecute: output '" + output_names_[i] + "' has shape " +
                                          ShapeToString(found->shape) + " for this request, but output_shapes says " +
                                          output_shapes_[i].DebugString());
      TensorShape shape;
      TF_RETURN_IF_ERROR(TensorShape::BuildTensorShape(found->shape, &shape));
      Tensor* out = nullptr;
      TF_RETURN_IF_ERROR(ctx->allocate_output(static_cast<int>(i), shape, &out));
      std::memcpy(const_cast<char*>(out->tensor_data().data()), found->data, found->nbytes);
    }
    return absl::OkStatus();
  }

  std::vector<std::string> input_names_, output_names_;
  std::vector<PartialTensorShape> output_shapes_;
  std::vector<DType> input_dtypes_, output_dtypes_;
  RuntimeConfig config_;
  int64_t index_ = -1;

  std::mutex mu_;
  std::string runner_path_;
  std::shared_ptr<ModelRunner> runner_;
};

}  // namespace
}  // namespace tfpopef

REGISTER_KERNEL_BUILDER(Name("PopefExecute").Device(::tensorflow::DEVICE_CPU).HostMemory("popef_path"),
                        tfpopef::PopefExecuteOp);
