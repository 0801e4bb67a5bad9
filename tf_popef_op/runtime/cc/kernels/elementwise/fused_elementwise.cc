// The internal op FusedElementwise (docs/popef.md, "Internal ops"): a chain of elementwise
// ops run as one loop over the data, written by the compiler's fuse_elementwise_chain pass.
// attr `program`: the instructions (elementwise_program.h). Inputs, each float:
//   the output's shape          a full tensor, read elementwise;
//   N elements, N = the last dim (shape [N] or [1, ..., 1, N])   a per-last-axis vector;
//   one element                 a scalar, read once per run.
// The data is walked once in blocks of at most kBlock elements (L1-sized, so the
// intermediates of every instruction stay in cache), the blocks split over the thread pool;
// each instruction writes its block into the chunk's scratch registers, the last one into
// the output. When N < kBlock the blocks are whole rows and each per-last-axis vector is tiled
// into scratch once per run; otherwise blocks are row segments and read the vector directly.
// Arithmetic per SIMD path (elementwise_program_ops.inc), transcendentals via vector_math.h.
// float16 computes in float32 the same way: each block of a full input is widened into the
// chunk's scratch before the program runs on it, the last instruction's block is narrowed once
// (nearest even) into the output, and the vector and scalar inputs are widened once per run.
#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/elementwise/elementwise_program.h"
#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace kernels {
namespace {

using elementwise::Instruction;
using elementwise::Opcode;
using elementwise::Operand;

constexpr int64_t kBlock = 1024;

enum class InputKind { kFull, kRow, kScalar };

const elementwise::BlockOps& ActiveBlockOps() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (vmath::UsesAvx2(vmath::ActivePath())) return elementwise::kAvx2BlockOps;
#endif
  return elementwise::kPortableBlockOps;
}

class FusedElementwiseKernel final : public Kernel {
 public:
  FusedElementwiseKernel(std::vector<Instruction> program, std::vector<InputKind> kinds, int64_t total,
                         int64_t row, bool half)
      : program_(std::move(program)), kinds_(std::move(kinds)), total_(total), row_(row), half_(half) {
    has_rows_ = row_ > 0 && std::count(kinds_.begin(), kinds_.end(), InputKind::kRow) > 0;
    // Blocks: whole rows (rows_per_block of them) when rows are short and vectors are read,
    // else plain runs of kBlock elements (within one row when vectors are read).
    if (has_rows_ && row_ < kBlock) {
      block_ = (kBlock / row_) * row_;
      tile_ = block_;
    } else {
      block_ = kBlock;
      tile_ = 0;
    }
    segments_per_row_ = has_rows_ && row_ >= kBlock ? (row_ + kBlock - 1) / kBlock : 0;
    num_blocks_ = segments_per_row_ ? (total_ / row_) * segments_per_row_ : (total_ + block_ - 1) / block_;
    bool math = false;
    for (const auto& ins : program_) math |= ins.op == Opcode::kExp || ins.op == Opcode::kLog ||
                                             ins.op == Opcode::kTanh || ins.op == Opcode::kSigmoid ||
                                             ins.op == Opcode::kErf;
    grain_ = ItemsPerChunk(block_, math ? kMathGrain : kStreamingGrain / 4);
    chunks_ = ThreadPool::Global().NumChunks(num_blocks_, grain_);
    for (InputKind k : kinds_) num_tiles_ += k == InputKind::kRow && tile_ > 0 ? 1 : 0;
    // float16: a block register per full input, and a float32 copy of each other input.
    if (half_) {
      for (InputKind k : kinds_) {
        block_registers_ += k == InputKind::kFull ? 1 : 0;
        widened_elements_ += k == InputKind::kRow ? row_ : (k == InputKind::kScalar ? 1 : 0);
      }
    }
  }

  size_t scratch_bytes() const override {
    const size_t registers =
        static_cast<size_t>(chunks_) * (program_.size() + block_registers_) * static_cast<size_t>(block_);
    return (registers + static_cast<size_t>(num_tiles_ * tile_ + widened_elements_)) * sizeof(float);
  }

  void Run(const KernelContext& ctx) const override {
    if (total_ == 0) return;
    const size_t per_chunk = (program_.size() + block_registers_) * static_cast<size_t>(block_);
    float* scratch = static_cast<float*>(ctx.scratch);
    float* tiles = scratch + static_cast<size_t>(chunks_) * per_chunk;
    float* widened = tiles + num_tiles_ * tile_;
    // Per input: its data pointer for a block starting at flat offset `o` is base + o·step
    // (full), tile/vector + (o mod N) (row) or the scalar (stride 0).
    const float* bases[kMaxInputs];
    for (size_t i = 0; i < kinds_.size(); ++i) {
      bases[i] = static_cast<const float*>(ctx.inputs[i]);
      if (half_ && kinds_[i] != InputKind::kFull) {
        const int64_t count = kinds_[i] == InputKind::kRow ? row_ : 1;
        WidenHalfToFloat(static_cast<const uint16_t*>(ctx.inputs[i]), widened, count);
        bases[i] = widened;
        widened += count;
      }
      if (kinds_[i] == InputKind::kRow && tile_ > 0) {
        for (int64_t r = 0; r < tile_; r += row_) std::memcpy(tiles + r, bases[i], row_ * sizeof(float));
        bases[i] = tiles;
        tiles += tile_;
      }
    }
    const elementwise::BlockOps& ops = ActiveBlockOps();
    ParallelForChunks(num_blocks_, grain_, [&](int64_t chunk, int64_t begin, int64_t end) {
      float* regs = scratch + static_cast<size_t>(chunk) * per_chunk;
      float* input_regs = regs + program_.size() * static_cast<size_t>(block_);  // float16 full inputs
      const float* full[kMaxInputs];  // each full input's block, as float32
      for (int64_t blk = begin; blk < end; ++blk) {
        int64_t o, n;
        if (segments_per_row_) {
          const int64_t r = blk / segments_per_row_, s = blk % segments_per_row_;
          o = r * row_ + s * kBlock;
          n = std::min(kBlock, row_ - s * kBlock);
        } else {
          o = blk * block_;
          n = std::min(block_, total_ - o);
        }
        if (!half_) {
          for (size_t i = 0; i < kinds_.size(); ++i)
            if (kinds_[i] == InputKind::kFull) full[i] = bases[i] + o;
          RunBlock(ops, full, bases, regs, static_cast<float*>(ctx.outputs[0]) + o, o, n);
          continue;
        }
        float* reg = input_regs;
        for (size_t i = 0; i < kinds_.size(); ++i) {
          if (kinds_[i] != InputKind::kFull) continue;
          WidenHalfToFloat(static_cast<const uint16_t*>(ctx.inputs[i]) + o, reg, n);
          full[i] = reg;
          reg += block_;
        }
        float* out = regs + (program_.size() - 1) * static_cast<size_t>(block_);
        RunBlock(ops, full, bases, regs, out, o, n);
        NarrowFloatToHalf(out, static_cast<uint16_t*>(ctx.outputs[0]) + o, n);
      }
    });
  }

  static constexpr size_t kMaxInputs = 64;

 private:
  // The operand's pointer for the block at flat offset o and its stride (0: scalar); `full`
  // holds each full input's block.
  const float* Pointer(const Operand& v, const float* const* full, const float* const* bases, float* regs, int64_t o,
                       int64_t* stride) const {
    *stride = 1;
    switch (v.kind) {
      case Operand::Kind::kTemp:
        return regs + static_cast<size_t>(v.index) * block_;
      case Operand::Kind::kLiteral:
        *stride = 0;
        return &v.value;
      case Operand::Kind::kInput:
        break;
    }
    switch (kinds_[v.index]) {
      case InputKind::kFull:
        return full[v.index];
      case InputKind::kRow:
        // Tiled (blocks are whole rows, o mod N = 0) or the vector itself (a row segment).
        return bases[v.index] + (tile_ > 0 ? 0 : o % row_);
      case InputKind::kScalar:
        *stride = 0;
        return bases[v.index];
    }
    return nullptr;
  }

  void RunBlock(const elementwise::BlockOps& ops, const float* const* full, const float* const* bases, float* regs,
                float* out, int64_t o, int64_t n) const {
    for (size_t j = 0; j < program_.size(); ++j) {
      const Instruction& ins = program_[j];
      float* dst = j + 1 == program_.size() ? out : regs + j * block_;
      int64_t sa, sb;
      const float* a = Pointer(ins.a, full, bases, regs, o, &sa);  // sa = 0: a scalar (the loops broadcast it)
      switch (ins.op) {
        case Opcode::kNeg: case Opcode::kAbs: case Opcode::kRelu: case Opcode::kSqrt: case Opcode::kReciprocal:
          ScalarSafeUnary(ops, ins.op, a, sa, dst, n);
          break;
        case Opcode::kExp: case Opcode::kLog: case Opcode::kTanh: case Opcode::kSigmoid: case Opcode::kErf:
          Transcendental(ins.op, a, sa, dst, n);
          break;
        case Opcode::kClip:
          if (sa == 0) {
            const float v = *a < ins.b.value ? ins.b.value : (*a > ins.c.value ? ins.c.value : *a);
            std::fill(dst, dst + n, v);
          } else {
            ops.clip(a, ins.b.value, ins.c.value, dst, n);
          }
          break;
        default: {
          const float* b = Pointer(ins.b, full, bases, regs, o, &sb);
          ops.binary(ins.op, a, sa, b, sb, dst, n);
        }
      }
    }
  }

  // A unary op of a scalar input (a runtime scalar): computed on one element, then filled.
  static void ScalarSafeUnary(const elementwise::BlockOps& ops, Opcode op, const float* a, int64_t sa, float* dst,
                              int64_t n) {
    if (sa != 0) return ops.unary(op, a, dst, n);
    float v;
    ops.unary(op, a, &v, 1);
    std::fill(dst, dst + n, v);
  }

  static void Transcendental(Opcode op, const float* a, int64_t sa, float* dst, int64_t n) {
    const int64_t count = sa == 0 ? 1 : n;
    switch (op) {
      case Opcode::kExp: vmath::Exp(a, dst, count); break;
      case Opcode::kLog: vmath::Log(a, dst, count); break;
      case Opcode::kTanh: vmath::Tanh(a, dst, count); break;
      case Opcode::kSigmoid: vmath::Sigmoid(a, dst, count); break;
      case Opcode::kErf: vmath::Erf(a, dst, count); break;
      default: break;
    }
    if (sa == 0) std::fill(dst + 1, dst + n, dst[0]);
  }

  const std::vector<Instruction> program_;
  const std::vector<InputKind> kinds_;
  const int64_t total_, row_;
  const bool half_;  // float16 inputs and output
  bool has_rows_ = false;
  size_t block_registers_ = 0;   // float16: full inputs, widened a block at a time
  int64_t widened_elements_ = 0;  // float16: the vector and scalar inputs' float32 copies
  int64_t block_ = kBlock, tile_ = 0, segments_per_row_ = 0, num_blocks_ = 0, grain_ = 1, chunks_ = 1;
  int64_t num_tiles_ = 0;
};

std::unique_ptr<Kernel> CreateFusedElementwiseKernel(const KernelSpec& spec) {
  const auto& shape = spec.outputs[0].shape;
  const int64_t total = Product(shape);
  const int64_t row = shape.empty() ? 1 : shape.back();
  std::vector<InputKind> kinds;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const auto& s = spec.inputs[i].shape;
    const int64_t count = Product(s);
    const bool leading_ones =
        std::all_of(s.begin(), s.empty() ? s.end() : s.end() - 1, [](int64_t d) { return d == 1; });
    if (s == shape) {
      kinds.push_back(InputKind::kFull);
    } else if (count == 1 && s.size() <= shape.size()) {
      kinds.push_back(InputKind::kScalar);
    } else if (!s.empty() && s.back() == row && leading_ones && s.size() <= shape.size()) {
      kinds.push_back(InputKind::kRow);
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  spec.Where() + ": input " + std::to_string(i) + " has shape " + ShapeToString(s) +
                      "; FusedElementwise reads inputs of the output's shape " + ShapeToString(shape) +
                      ", per-last-axis vectors [" + std::to_string(row) + "] or scalars");
    }
  }
  std::vector<Instruction> program;
  try {
    program = elementwise::ParseProgram(spec.attrs.String("program"), static_cast<int>(spec.inputs.size()));
  } catch (const std::invalid_argument& e) {
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": program: " + e.what());
  }
  vmath::ActivePath();  // a bad TF_POPEF_SIMD fails here, at prepare
  return std::make_unique<FusedElementwiseKernel>(std::move(program), std::move(kinds), total, row,
                                                  spec.inputs[0].dtype == DType::kFloat16);
}

std::unique_ptr<Kernel> CreateFusedElementwise(const KernelSpec& spec) {
  CheckArity(spec, 1, FusedElementwiseKernel::kMaxInputs, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return CreateFusedElementwiseKernel(spec);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("FusedElementwise", CreateFusedElementwise);

}  // namespace kernels
}  // namespace tfpopef
