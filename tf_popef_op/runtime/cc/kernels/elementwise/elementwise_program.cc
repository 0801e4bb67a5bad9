// FusedElementwise's program: the parser and the portable block arithmetic
// (elementwise_program.h; the AVX2 copy of the arithmetic is elementwise_program_avx2.cc).
#include "tf_popef_op/runtime/cc/kernels/elementwise/elementwise_program.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "tf_popef_op/runtime/cc/kernels/support/activations.h"

namespace tfpopef {
namespace kernels {
namespace elementwise {
namespace {

#include "tf_popef_op/runtime/cc/kernels/elementwise/elementwise_program_ops.inc"

struct OpcodeInfo {
  const char* name;
  Opcode op;
  int arity;
};

constexpr OpcodeInfo kOpcodes[] = {
    {"neg", Opcode::kNeg, 1},   {"abs", Opcode::kAbs, 1},     {"relu", Opcode::kRelu, 1},
    {"sqrt", Opcode::kSqrt, 1}, {"reciprocal", Opcode::kReciprocal, 1},
    {"exp", Opcode::kExp, 1},   {"log", Opcode::kLog, 1},     {"tanh", Opcode::kTanh, 1},
    {"sigmoid", Opcode::kSigmoid, 1}, {"erf", Opcode::kErf, 1},
    {"add", Opcode::kAdd, 2},   {"sub", Opcode::kSub, 2},     {"mul", Opcode::kMul, 2},
    {"div", Opcode::kDiv, 2},   {"max", Opcode::kMax, 2},     {"min", Opcode::kMin, 2},
    {"pow", Opcode::kPow, 2},   {"clip", Opcode::kClip, 3},
};

Operand ParseOperand(const std::string& token, int instruction, int num_inputs, const std::string& where) {
  Operand o;
  if (!token.empty() && (token[0] == 'x' || token[0] == 't') && token.size() > 1 &&
      std::all_of(token.begin() + 1, token.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    o.kind = token[0] == 'x' ? Operand::Kind::kInput : Operand::Kind::kTemp;
    o.index = std::atoi(token.c_str() + 1);
    const int limit = token[0] == 'x' ? num_inputs : instruction;
    if (o.index >= limit)
      throw std::invalid_argument(where + ": operand '" + token + "' refers to " +
                                  (token[0] == 'x' ? "input " : "instruction ") + std::to_string(o.index) +
                                  " but only " + std::to_string(limit) +
                                  (token[0] == 'x' ? " inputs exist" : " come before it"));
    return o;
  }
  errno = 0;
  char* end = nullptr;
  const float v = std::strtof(token.c_str(), &end);
  if (token.empty() || end != token.c_str() + token.size() || errno == EINVAL)
    throw std::invalid_argument(where + ": operand '" + token + "' is neither xI, tJ nor a number");
  o.kind = Operand::Kind::kLiteral;
  o.value = v;
  return o;
}

}  // namespace

std::vector<Instruction> ParseProgram(const std::string& text, int num_inputs) {
  std::vector<Instruction> program;
  std::stringstream all(text);
  std::string line;
  while (std::getline(all, line, ';')) {
    std::stringstream words(line);
    std::vector<std::string> tokens;
    for (std::string w; words >> w;) tokens.push_back(w);
    if (tokens.empty()) continue;
    const int index = static_cast<int>(program.size());
    const std::string where = "instruction " + std::to_string(index) + " '" + line + "'";
    const OpcodeInfo* info = nullptr;
    for (const auto& candidate : kOpcodes)
      if (tokens[0] == candidate.name) info = &candidate;
    if (info == nullptr) throw std::invalid_argument(where + ": unknown opcode '" + tokens[0] + "'");
    if (static_cast<int>(tokens.size()) - 1 != info->arity)
      throw std::invalid_argument(where + ": '" + tokens[0] + "' takes " + std::to_string(info->arity) +
                                  " operand(s), got " + std::to_string(tokens.size() - 1));
    Instruction ins{info->op, {}, {}, {}};
    Operand* slots[3] = {&ins.a, &ins.b, &ins.c};
    for (int i = 0; i < info->arity; ++i) *slots[i] = ParseOperand(tokens[i + 1], index, num_inputs, where);
    if (info->op == Opcode::kPow && ins.b.kind != Operand::Kind::kLiteral)
      throw std::invalid_argument(where + ": pow's exponent must be a literal");
    if (info->op == Opcode::kClip &&
        (ins.b.kind != Operand::Kind::kLiteral || ins.c.kind != Operand::Kind::kLiteral))
      throw std::invalid_argument(where + ": clip's bounds must be literals");
    if (ins.a.kind == Operand::Kind::kLiteral && info->arity == 1)
      throw std::invalid_argument(where + ": a unary op of a literal (fold it at compile time)");
    program.push_back(ins);
  }
  if (program.empty()) throw std::invalid_argument("the program has no instructions");
  return program;
}

const BlockOps kPortableBlockOps = {BlockBinary, BlockUnary, BlockClip};

}  // namespace elementwise
}  // namespace kernels
}  // namespace tfpopef
