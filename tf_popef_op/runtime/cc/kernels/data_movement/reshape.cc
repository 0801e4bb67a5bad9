// Reshape: the bytes do not change, only the static shape does. The compiler also lowers
// Flatten, Squeeze, Unsqueeze and Identity to it, and may place the output at the input's
// offset, in which case there is nothing to do.
#include <cstring>
#include <memory>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"

namespace tfpopef {
namespace kernels {
namespace {

class ReshapeKernel final : public Kernel {
 public:
  explicit ReshapeKernel(size_t nbytes) : nbytes_(nbytes) {}

  void Run(const KernelContext& ctx) const override {
    if (ctx.outputs[0] == ctx.inputs[0] || nbytes_ == 0) return;
    std::memmove(ctx.outputs[0], ctx.inputs[0], nbytes_);  // memmove: safe even if a plan overlaps
  }

 private:
  const size_t nbytes_;
};

std::unique_ptr<Kernel> CreateReshape(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  const TensorDesc& in = spec.inputs[0];
  const TensorDesc& out = spec.outputs[0];
  if (in.dtype != out.dtype)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output dtype " + DTypeName(out.dtype) +
                                                 " differs from input dtype " + DTypeName(in.dtype) +
                                                 " (Reshape does not convert; use Cast)");
  if (in.numel() != out.numel())
    throw Error(ErrorCode::kInvalidArgument,
                spec.Where() + ": cannot reshape " + ShapeToString(in.shape) + " (" + std::to_string(in.numel()) +
                    " elements) to " + ShapeToString(out.shape) + " (" + std::to_string(out.numel()) + " elements)");
  return std::make_unique<ReshapeKernel>(in.nbytes());
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Reshape", CreateReshape);

}  // namespace kernels
}  // namespace tfpopef
