#include "tf_popef_op/runtime/cc/core/session.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace tfpopef {
namespace {

// A subgraph index read from the index anchor; -1 for values no subgraph index can have.
int64_t ReadIndex(DType dtype, const void* p) {
  bool ok = false;
  const int64_t v = ReadIntegerScalar(dtype, p, &ok);
  return ok ? v : -1;
}

}  // namespace

Session::Session(std::shared_ptr<const Executable> executable, Device& device)
    : exe_(std::move(executable)), device_(device) {
  const auto& tensors = exe_->tensors();
  auto operand = [&](int t) {
    const ExecTensor& x = tensors[t];
    return Operand{x.storage, x.anchor, x.offset};
  };
  tables_.resize(exe_->programs().size());
  for (size_t p = 0; p < exe_->programs().size(); ++p) {
    for (const Step& s : exe_->programs()[p].steps) {
      StepTable t;
      for (int i : s.inputs) t.inputs.push_back(operand(i));
      for (int o : s.outputs) t.outputs.push_back(operand(o));
      t.input_ptrs.resize(t.inputs.size());
      t.output_ptrs.resize(t.outputs.size());
      tables_[p].push_back(std::move(t));
    }
  }
  scratch_.Resize(std::max<size_t>(exe_->scratch_bytes(), kDeviceAlignment));
}

void Session::Load() {
  auto lock = device_.Lock();
  if (!device_.Holds(exe_->hash())) LoadLocked();
}

void Session::LoadLocked() {
  const auto start = std::chrono::steady_clock::now();
  device_.PrepareLoad(exe_->weights_bytes(), exe_->arena_bytes());
  uint8_t* weights = device_.weights();
  for (int p : exe_->load_flow())
    for (const Step& s : exe_->programs()[p].steps)
      if (s.nbytes > 0) std::memcpy(weights + s.offset, s.tensor_data->payload, s.nbytes);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
  device_.FinishLoad(exe_->hash(), ns.count());
}

void Session::Run(int subgraph, void* const* anchors) {
  if (subgraph < 0 || static_cast<size_t>(subgraph) >= exe_->subgraphs().size())
    throw Error(ErrorCode::kInvalidArgument, exe_->source() + ": subgraph " + std::to_string(subgraph) +
                                                 " does not exist (the executable has " +
                                                 std::to_string(exe_->subgraphs().size()) + ")");
  auto lock = device_.Lock();
  if (!device_.Holds(exe_->hash())) LoadLocked();  // another executable replaced ours
  RunProgram(exe_->main_program(), subgraph, anchors);
}

void* Session::Resolve(const Operand& op, void* const* anchors) const {
  switch (op.storage) {
    case Storage::kInput:
    case Storage::kOutput: return anchors[op.anchor];
    case Storage::kWeight: return device_.weights() + op.offset;
    case Storage::kArena: return device_.arena() + op.offset;
  }
  return nullptr;
}

void Session::RunProgram(int program, int subgraph, void* const* anchors) {
  const Program& prog = exe_->programs()[program];
  std::vector<StepTable>& tables = tables_[program];
  for (size_t i = 0; i < prog.steps.size(); ++i) {
    const Step& step = prog.steps[i];
    if (step.kind == Step::Kind::kSwitch) {
      const Anchor& a = exe_->anchors()[step.index_anchor];
      const void* p = anchors[step.index_anchor];
      const int64_t index = p != nullptr ? ReadIndex(a.desc.dtype, p) : -1;
      if (index < 0 || index >= static_cast<int64_t>(step.cases.size()) || index != subgraph)
        throw Error(ErrorCode::kInternal, exe_->source() + ": Switch on '" + a.name + "' read " +
                                              std::to_string(index) + " while running subgraph " +
                                              std::to_string(subgraph));
      RunProgram(step.cases[index], subgraph, anchors);
      continue;
    }
    if (step.kind != Step::Kind::kKernel) continue;  // LoadTensorData only runs in Load
    StepTable& t = tables[i];
    for (size_t k = 0; k < t.inputs.size(); ++k) t.input_ptrs[k] = Resolve(t.inputs[k], anchors);
    for (size_t k = 0; k < t.outputs.size(); ++k) t.output_ptrs[k] = Resolve(t.outputs[k], anchors);
    for (const void* ptr : t.input_ptrs)
      if (ptr == nullptr)
        throw Error(ErrorCode::kInternal, exe_->source() + ": op '" + step.op + "' (node '" + step.node +
                                              "'): an input anchor is not bound for subgraph " + std::to_string(subgraph));
    for (void* ptr : t.output_ptrs)
      if (ptr == nullptr)
        throw Error(ErrorCode::kInternal, exe_->source() + ": op '" + step.op + "' (node '" + step.node +
                                              "'): an output anchor is not bound for subgraph " + std::to_string(subgraph));
    const KernelContext ctx{t.input_ptrs.data(), t.output_ptrs.data(), scratch_.data()};
    try {
      step.kernel->Run(ctx);
    } catch (const Error& e) {
      throw Error(e.code(), "running op '" + step.op + "' (node '" + step.node + "'): " + e.what());
    } catch (const std::exception& e) {
      throw Error(ErrorCode::kInternal, "running op '" + step.op + "' (node '" + step.node + "'): " + e.what());
    }
  }
}

}  // namespace tfpopef
