// A validated, ready-to-run PopEF executable: anchors, tensors with their storage, programs
// whose kernel steps are prepared through the KernelRegistry, and subgraphs.
//
// Ownership: created only by Executable::Create (a factory that either returns a fully
// validated executable or throws an Error naming the file and the field); held by
// shared_ptr. It keeps the PopefReader alive because LoadTensorData steps point into its
// TensorData bytes.
// Thread safety: immutable after Create; Kernel::Run is const, so several Sessions may run
// the same Executable concurrently (each with its own device memory and scratch).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tf_popef_op/runtime/cc/base/dtype.h"
#include "tf_popef_op/runtime/cc/kernels/kernel.h"
#include "tf_popef_op/runtime/cc/popef/popef_reader.h"

namespace tfpopef {

// An input or output of the executable (Metadata "anchors").
struct Anchor {
  std::string name;
  TensorDesc desc;  // compiled dtype and shape
  bool is_input = true;
  int subgraph = -1;    // owning subgraph; -1 = shared by all subgraphs (the fusion index)
  int batch_axis = -1;  // axis that carries the batch; -1 = none
  std::vector<std::string> aliases;
};

enum class Storage : uint8_t { kInput, kOutput, kWeight, kArena };
const char* StorageName(Storage storage);

// A tensor of the emulator program (Executable "tensors").
struct ExecTensor {
  int id = 0;  // the id used in the JSON (error messages)
  std::string name;
  TensorDesc desc;
  Storage storage = Storage::kArena;
  uint64_t offset = 0;  // in weight memory / the arena; unused for input/output
  int anchor = -1;      // input/output storage: index into anchors()
};

struct ControlFlow;  // control_flow.h

// One program step: a kernel call, a Switch (control), a LoadTensorData copy, or run-time
// control flow (If / Loop: sub-programs, see control_flow.h).
struct Step {
  enum class Kind : uint8_t { kKernel, kSwitch, kLoadTensorData, kIf, kLoop };
  Kind kind = Kind::kKernel;
  std::string op;    // "Add", "Switch", "LoadTensorData"
  std::string node;  // ONNX node name (kernel steps), for messages
  // kKernel: tensor indices (into tensors()) and the prepared kernel.
  std::vector<int> inputs, outputs;
  std::unique_ptr<Kernel> kernel;
  // kKernel: the input whose bytes output 0 takes ("in_place_input", docs/popef.md "Arena
  // plan"), or -1.
  int in_place_input = -1;
  // kSwitch: the integer anchor that selects the case, and the case program indices.
  int index_anchor = -1;
  std::vector<int> cases;
  // kLoadTensorData: source blob and destination in weight memory.
  const PopefBlob* tensor_data = nullptr;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  // kIf / kLoop: sub-programs and operand layout (inputs/outputs above are its operands).
  std::shared_ptr<const ControlFlow> control;
};

struct Program {
  std::string name;
  std::vector<Step> steps;
};

// The unit the runtime schedules (Executable "subgraphs").
struct Subgraph {
  int index = 0;
  std::string name;
  int program = -1;  // index into programs()
  int64_t batch_size = 1;
  int batch_axis = 0;  // -1 = no batch axis
  std::vector<int> inputs, outputs;  // anchor indices (never the fusion index anchor)
};

class Executable {
 public:
  // Parses and validates Metadata + Executable JSON and prepares every kernel. Errors:
  // kInvalidArgument (bad field, inconsistent anchors/tensors/offsets), kUnimplemented
  // (unknown op, unsupported dtype or format version), kDataLoss from the reader.
  static std::shared_ptr<const Executable> Create(std::shared_ptr<const PopefReader> popef);

  const std::string& source() const { return popef_->source(); }
  const PopefReader& popef() const { return *popef_; }
  const std::string& ipu_version() const { return ipu_version_; }
  const std::string& producer() const { return producer_; }
  // Identifies the executable's content (metadata, program and every blob's checksum).
  uint64_t hash() const { return hash_; }
  std::string hash_hex() const;

  uint64_t weights_bytes() const { return weights_bytes_; }
  uint64_t arena_bytes() const { return arena_bytes_; }
  // Device memory needed: 64-aligned weights + arena.
  uint64_t device_bytes() const;
  size_t scratch_bytes() const { return scratch_bytes_; }  // max over kernels

  const std::vector<Anchor>& anchors() const { return anchors_; }
  // Anchor index for a name or alias; -1 if unknown.
  int FindAnchor(const std::string& name_or_alias) const;
  const std::vector<ExecTensor>& tensors() const { return tensors_; }
  const std::vector<Program>& programs() const { return programs_; }
  const std::vector<int>& load_flow() const { return load_flow_; }  // program indices
  int main_program() const { return main_program_; }
  const std::vector<Subgraph>& subgraphs() const { return subgraphs_; }
  // Fused executables: the anchor read by main's Switch; -1 for a single model.
  int index_anchor() const { return index_anchor_; }
  bool fused() const { return index_anchor_ >= 0; }

 private:
  explicit Executable(std::shared_ptr<const PopefReader> popef) : popef_(std::move(popef)) {}
  class Parser;

  std::shared_ptr<const PopefReader> popef_;
  std::string ipu_version_, producer_;
  uint64_t hash_ = 0;
  uint64_t weights_bytes_ = 0, arena_bytes_ = 0;
  size_t scratch_bytes_ = 0;
  std::vector<Anchor> anchors_;
  std::unordered_map<std::string, int> anchor_by_name_;  // names and aliases
  std::vector<ExecTensor> tensors_;
  std::vector<Program> programs_;
  std::vector<int> load_flow_;
  int main_program_ = -1;
  std::vector<Subgraph> subgraphs_;
  int index_anchor_ = -1;
};

}  // namespace tfpopef
