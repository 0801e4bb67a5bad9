// The arena plan contract (docs/popef.md "Arena plan"), checked before an executable is
// accepted: no two arena tensors that are live at the same time share a byte, unless one is a
// view of the other: a Reshape's output at its input's offset, a Concat input at its slice
// of the output, or a step's output at the bytes of its in-place input (Step::in_place_input)
// whose buffer dies at that step. The runtime trusts offsets for speed, so a
// plan that breaks this would compute wrong answers instead of failing.
//
// Liveness is the compiler's (compiler/lowering/memory_plan.py): a tensor lives from the first
// step that uses it to the last one, inclusive; the If/Loop sub-programs of a step are part of
// that step in the enclosing program (a tensor an inner step uses is live across the whole
// control step there); both branches of an If run alternately, so their own tensors may share
// bytes; a loop body's formal inputs and results live through the whole body.
#pragma once

#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/core/executable.h"

namespace tfpopef {

// Checks the program trees rooted at `roots` (the subgraphs' programs: only one runs at a
// time, so each is checked on its own). Also requires each sub-program to be run by one
// control step of its tree, which makes "the enclosing program" well defined. Throws Error
// kInvalidArgument naming both tensors, their byte ranges and the step where both are live.
// O(n log n) in tensors and steps (plus the control-flow nesting depth per tensor).
void CheckArenaPlan(const std::string& source, const std::vector<ExecTensor>& tensors,
                    const std::vector<Program>& programs, const std::vector<int>& roots);

}  // namespace tfpopef
