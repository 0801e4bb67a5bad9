// The program of the internal op FusedElementwise (fused_elementwise.cc; docs/popef.md,
// "Internal ops"): a straight-line list of elementwise instructions over one block of
// elements, parsed once at prepare from the step's `program` attribute.
//
// Text form (written by compiler/kernel_fusion/passes/fuse_elementwise_chain.py): instructions
// separated by ';', each `opcode operand [operand [operand]]` with the operands
//   xI   kernel input I (the block's elements of it: a full tensor, or a per-last-axis vector)
//   tJ   the result of instruction J < this one
//   a number (float32 literal, e.g. 0.5 or -inf): a scalar
// The last instruction's result is the output. Opcodes and arity:
//   unary  neg abs relu sqrt reciprocal exp log tanh sigmoid erf          (a)
//   binary add sub mul div max min pow                                    (a, b)
//   clip   (a, lo, hi)  lo and hi literals
// pow's exponent must be a literal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tfpopef {
namespace kernels {
namespace elementwise {

enum class Opcode {
  kNeg, kAbs, kRelu, kSqrt, kReciprocal, kExp, kLog, kTanh, kSigmoid, kErf,
  kAdd, kSub, kMul, kDiv, kMax, kMin, kPow, kClip,
};

struct Operand {
  enum class Kind { kInput, kTemp, kLiteral } kind = Kind::kLiteral;
  int index = 0;      // input or instruction index
  float value = 0.f;  // kLiteral
};

struct Instruction {
  Opcode op;
  Operand a, b, c;  // b, c unused by unary ops
};

// Parses and validates `text` for a kernel with `num_inputs` inputs; throws std::invalid_argument
// naming the instruction on any error (unknown opcode, wrong arity, bad operand, forward ref).
std::vector<Instruction> ParseProgram(const std::string& text, int num_inputs);

// One block's arithmetic, per SIMD path: y[i] = a[i] op b[i] over n elements, where a pointer
// stride of 0 means "the scalar *a". Transcendentals go through vector_math.h (its own dispatch).
struct BlockOps {
  void (*binary)(Opcode op, const float* a, int64_t a_stride, const float* b, int64_t b_stride, float* y,
                 int64_t n);
  void (*unary)(Opcode op, const float* a, float* y, int64_t n);  // the non-transcendental ones
  void (*clip)(const float* a, float lo, float hi, float* y, int64_t n);
};

extern const BlockOps kPortableBlockOps;
// Defined on x86-64 builds only (elementwise_program_avx2.cc): use only when CpuHasAvx2Fma().
extern const BlockOps kAvx2BlockOps;

}  // namespace elementwise
}  // namespace kernels
}  // namespace tfpopef
