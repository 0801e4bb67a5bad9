// Run-time control flow of the emulator program (docs/popef.md §3 "Control flow", Executable
// version 2): an `If` step runs one of two sub-programs on the value of a bool tensor, a `Loop`
// step runs its body sub-program while a trip count and a bool condition allow, copying the
// loop-carried values from the body's results back into its inputs between iterations.
//
// A control step keeps the kernel steps' operand convention: Step::inputs are the tensors it
// reads and Step::outputs those it writes, in the fixed orders below, so the Session resolves
// them into pointers like any kernel operands; RunControlFlow then only reads/writes bytes and
// calls back into the Session to run a sub-program.
//
//   If    inputs:  cond
//         outputs: the If's results (written by the branches' last steps; listed so the
//                  structure checks see which anchors the step writes)
//   Loop  inputs:  [trip_count] [cond] cond_out, initial[0..C), body_out[0..C), scan_item[0..S)
//         outputs: iter_num, cond_in, body_in[0..C), final[c] for each carried value that has
//                  one, scan_output[0..S)
//
// Ownership: a ControlFlow is immutable, owned by its Step (shared_ptr).
// Thread safety: RunControlFlow is reentrant; it touches only the memory it is given.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/base/json_fields.h"
#include "tf_popef_op/runtime/cc/core/executable.h"

namespace tfpopef {

struct ControlFlow {
  std::string node;  // ONNX node name, for messages
  // If
  int then_program = -1, else_program = -1;
  // Loop
  int body_program = -1;
  int64_t max_trip_count = -1;  // -1: none (the trip_count tensor or the condition ends it)
  bool has_trip_count = false, has_cond = false;
  std::vector<uint64_t> carried_bytes;  // per carried value
  std::vector<bool> has_final;          // per carried value
  std::vector<uint64_t> scan_item_bytes;

  bool is_loop() const { return body_program >= 0; }
  std::vector<int> sub_programs() const {
    return is_loop() ? std::vector<int>{body_program} : std::vector<int>{then_program, else_program};
  }
};

// Fills `step` (kind, inputs, outputs, control) from an "If" or "Loop" step object. `tensor`
// maps a JSON tensor id to its index in `tensors` (failing on unknown ids), `program` a
// program name to its index.
void ParseControlStep(const JsonObject& o, Step& step, const std::vector<ExecTensor>& tensors,
                      const std::function<int(const JsonObject&, const std::string&, int64_t)>& tensor,
                      const std::function<int(const JsonObject&, const std::string&, const std::string&)>& program);

// An If/Loop step's operands by the program they belong to. `enclosing`: tensors of the program
// holding the step (If: cond and the results; Loop: trip_count, cond, initial values, finals,
// scan outputs). `body`: a Loop body's formal inputs and results (iter_num, cond_in, body_in,
// cond_out, body_out, scan items), which the step writes and reads around every iteration.
struct ControlOperands {
  std::vector<int> enclosing, body;
};
ControlOperands SplitControlOperands(const Step& step);

// Checks that no program reaches itself through If/Loop sub-programs and that sub-programs
// hold kernel and control steps only. Throws Error naming the programs.
void CheckControlFlowPrograms(const std::string& source, const std::vector<Program>& programs);

// `program` and every step of the sub-programs it reaches, depth first.
std::vector<const Step*> StepsWithSubprograms(const std::vector<Program>& programs, int program);

// How RunControlFlow runs a sub-program: a plain function pointer + context rather than a
// std::function, so the execute path allocates nothing.
struct SubprogramRunner {
  void (*run)(void* context, int program);
  void* context;
  void operator()(int program) const { run(context, program); }
};

// Runs one If/Loop step over resolved operand pointers (the orders above); run_program(p) runs
// sub-program p. Errors: kInternal if a loop with scan outputs stops before filling them.
void RunControlFlow(const Step& step, const void* const* inputs, void* const* outputs,
                    const SubprogramRunner& run_program);

}  // namespace tfpopef
