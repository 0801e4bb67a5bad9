#include "tf_popef_op/runtime/cc/core/session.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

#include "tf_popef_op/runtime/cc/core/control_flow.h"

namespace tfpopef {
namespace {

using Clock = std::chrono::steady_clock;

// A subgraph index read from the index anchor; -1 for values no subgraph index can have.
int64_t ReadIndex(DType dtype, const void* p) {
  bool ok = false;
  const int64_t v = ReadIntegerScalar(dtype, p, &ok);
  return ok ? v : -1;
}

uint64_t ElapsedNs(Clock::time_point start) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

// TF_POPEF_MMAP_WEIGHTS=0 copies every weight into device memory (the pre-mmap behaviour, kept
// for comparisons and as a fallback).
bool MapWeightsEnabled() {
  const char* v = std::getenv("TF_POPEF_MMAP_WEIGHTS");
  return v == nullptr || std::string(v) != "0";
}

[[noreturn]] void Unbound(const Executable& exe, const Step& step, const char* what, int subgraph) {
  throw Error(ErrorCode::kInternal, exe.source() + ": op '" + step.op + "' (node '" + step.node + "'): an " + what +
                                        " anchor is not bound for subgraph " + std::to_string(subgraph));
}

void RunKernel(const Step& step, const KernelContext& ctx) {
  try {
    step.kernel->Run(ctx);
  } catch (const Error& e) {
    throw Error(e.code(), "running op '" + step.op + "' (node '" + step.node + "'): " + e.what());
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInternal, "running op '" + step.op + "' (node '" + step.node + "'): " + e.what());
  }
}

}  // namespace

Session::Session(std::shared_ptr<const Executable> executable, Device& device)
    : exe_(std::move(executable)), device_(device) {
  const std::vector<const uint8_t*> mapped = PlanWeights();
  tables_.resize(exe_->programs().size());
  for (size_t p = 0; p < exe_->programs().size(); ++p) {
    for (const Step& s : exe_->programs()[p].steps) {
      StepTable t;
      for (const auto* list : {&s.inputs, &s.outputs}) {
        const bool is_input = list == &s.inputs;
        auto& ops = is_input ? t.inputs : t.outputs;
        for (int i : *list) {
          const ExecTensor& x = exe_->tensors()[i];
          const int slot = static_cast<int>(ops.size());
          ops.push_back(Operand{x.storage, x.anchor, x.offset, mapped[i]});
          if (x.storage == Storage::kInput || x.storage == Storage::kOutput)
            (is_input ? t.anchor_inputs : t.anchor_outputs).push_back(AnchorSlot{slot, x.anchor});
        }
      }
      t.input_ptrs.resize(t.inputs.size());
      t.output_ptrs.resize(t.outputs.size());
      tables_[p].push_back(std::move(t));
    }
  }
  scratch_.Resize(std::max<size_t>(exe_->scratch_bytes(), kDeviceAlignment));
}

// Decides, per weight tensor, whether it is used in place from its LoadTensorData blob, and
// which blobs a load must still copy. Returns, per tensor, its bytes in the PopEF or nullptr.
std::vector<const uint8_t*> Session::PlanWeights() {
  const auto& tensors = exe_->tensors();
  std::vector<const uint8_t*> mapped(tensors.size(), nullptr);
  struct Range {
    uint64_t begin, end;
    const uint8_t* src;
    bool copy;
    size_t order;  // position in the load programs: copies keep it (later loads overwrite)
  };
  std::vector<Range> ranges;
  for (int p : exe_->load_flow())
    for (const Step& s : exe_->programs()[p].steps)
      if (s.kind == Step::Kind::kLoadTensorData && s.nbytes > 0)
        ranges.push_back(Range{s.offset, s.offset + s.nbytes, s.tensor_data->payload, false, ranges.size()});
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  bool can_map = MapWeightsEnabled();
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].begin < ranges[i - 1].end) can_map = false;  // overlapping loads: order matters, copy all
  bool needs_device_weights = false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ExecTensor& t = tensors[i];
    if (t.storage != Storage::kWeight || t.desc.nbytes() == 0) continue;  // empty: never read
    const uint64_t begin = t.offset, end = t.offset + t.desc.nbytes();
    // The last range starting at or before the tensor.
    auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                               [](uint64_t v, const Range& r) { return v < r.begin; });
    const Range* r = it == ranges.begin() ? nullptr : &*(it - 1);
    const bool inside = r != nullptr && end <= r->end && (begin < r->end || begin == end);
    const uint8_t* src = inside ? r->src + (begin - r->begin) : nullptr;
    if (can_map && inside && reinterpret_cast<uintptr_t>(src) % kDeviceAlignment == 0) {
      mapped[i] = src;
      continue;
    }
    needs_device_weights = true;
    for (Range& x : ranges)  // every blob this tensor reads must be in device memory
      if (x.begin < end && begin < x.end) x.copy = true;
  }
  // A blob may be both copied and read in place (a mapped tensor and an unmappable view of the
  // same bytes): both hold the same, immutable, values.
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.order < b.order; });
  for (const Range& r : ranges) {
    const bool copy = r.copy || !can_map;
    if (copy) {
      load_copies_.push_back(LoadCopy{r.src, r.begin, r.end - r.begin});
      copied_weights_bytes_ += r.end - r.begin;
    } else {
      mapped_weights_bytes_ += r.end - r.begin;
    }
  }
  backed_weights_bytes_ = (needs_device_weights || !load_copies_.empty()) ? exe_->weights_bytes() : 0;
  return mapped;
}

void Session::Load() {
  auto lock = device_.Lock();
  if (!device_.Holds(exe_->hash())) LoadLocked();
}

void Session::LoadLocked() {
  const auto start = Clock::now();
  device_.PrepareLoad(exe_->weights_bytes(), exe_->arena_bytes(), backed_weights_bytes_);
  uint8_t* weights = device_.weights();
  for (const LoadCopy& c : load_copies_) std::memcpy(weights + c.offset, c.src, c.nbytes);
  device_.FinishLoad(exe_->hash(), static_cast<int64_t>(ElapsedNs(start)));
}

void* Session::Resolve(const Operand& op) const {
  switch (op.storage) {
    case Storage::kInput:
    case Storage::kOutput: return nullptr;  // bound per run
    case Storage::kWeight: return op.mapped != nullptr ? const_cast<uint8_t*>(op.mapped) : device_.weights() + op.offset;
    case Storage::kArena: return device_.arena() + op.offset;
  }
  return nullptr;
}

void Session::BindStorage() {
  for (auto& program : tables_)
    for (StepTable& t : program) {
      for (size_t k = 0; k < t.inputs.size(); ++k) t.input_ptrs[k] = Resolve(t.inputs[k]);
      for (size_t k = 0; k < t.outputs.size(); ++k) t.output_ptrs[k] = Resolve(t.outputs[k]);
    }
  bound_generation_ = device_.load_generation();
}

void Session::Run(int subgraph, void* const* anchors) {
  if (subgraph < 0 || static_cast<size_t>(subgraph) >= exe_->subgraphs().size())
    throw Error(ErrorCode::kInvalidArgument, exe_->source() + ": subgraph " + std::to_string(subgraph) +
                                                 " does not exist (the executable has " +
                                                 std::to_string(exe_->subgraphs().size()) + ")");
  auto lock = device_.Lock();
  if (!device_.Holds(exe_->hash())) LoadLocked();  // another executable replaced ours
  if (bound_generation_ != device_.load_generation()) BindStorage();
  if (!profiling()) {
    RunProgram<false>(exe_->main_program(), subgraph, anchors);
    return;
  }
  const auto start = Clock::now();
  RunProgram<true>(exe_->main_program(), subgraph, anchors);
  profile_run_ns_ += ElapsedNs(start);
  ++profile_runs_;
}

template <bool kProfile>
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
      RunProgram<kProfile>(step.cases[index], subgraph, anchors);
      continue;
    }
    if (step.kind == Step::Kind::kLoadTensorData) continue;  // only runs in Load
    StepTable& t = tables[i];
    for (const AnchorSlot& s : t.anchor_inputs) {
      const void* ptr = anchors[s.anchor];
      if (ptr == nullptr) Unbound(*exe_, step, "input", subgraph);
      t.input_ptrs[s.slot] = ptr;
    }
    for (const AnchorSlot& s : t.anchor_outputs) {
      void* ptr = anchors[s.anchor];
      if (ptr == nullptr) Unbound(*exe_, step, "output", subgraph);
      t.output_ptrs[s.slot] = ptr;
    }
    if (step.control) {  // If / Loop: runs sub-programs (control_flow.h)
      struct Context {
        Session* session;
        int subgraph;
        void* const* anchors;
      } context{this, subgraph, anchors};
      const SubprogramRunner run{[](void* c, int sub) {
                                   auto* x = static_cast<Context*>(c);
                                   x->session->template RunProgram<kProfile>(sub, x->subgraph, x->anchors);
                                 },
                                 &context};
      RunControlFlow(step, t.input_ptrs.data(), t.output_ptrs.data(), run);
      continue;
    }
    const KernelContext ctx{t.input_ptrs.data(), t.output_ptrs.data(), scratch_.data()};
    if constexpr (kProfile) {
      const auto start = Clock::now();
      RunKernel(step, ctx);
      t.total_ns += ElapsedNs(start);
      ++t.calls;
    } else {
      RunKernel(step, ctx);
    }
  }
}

SessionProfile Session::Profile() const {
  auto lock = device_.Lock();
  SessionProfile out;
  out.runs = profile_runs_;
  out.run_ns = profile_run_ns_;
  for (size_t p = 0; p < tables_.size(); ++p) {
    const Program& prog = exe_->programs()[p];
    for (size_t i = 0; i < tables_[p].size(); ++i) {
      const StepTable& t = tables_[p][i];
      if (t.calls == 0) continue;
      const Step& s = prog.steps[i];
      out.steps.push_back(StepProfile{prog.name, static_cast<int>(i), s.op, s.node, t.calls, t.total_ns});
    }
  }
  return out;
}

void Session::ResetProfile() {
  auto lock = device_.Lock();
  profile_runs_ = profile_run_ns_ = 0;
  for (auto& program : tables_)
    for (StepTable& t : program) t.calls = t.total_ns = 0;
}

}  // namespace tfpopef
