// Builds an Executable from its PopEF (docs/popef.md) in named steps, each validating what it
// reads and naming the file, JSON path and entry on any error. Used only by Executable::Create.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "tf_popef_op/runtime/cc/base/json_fields.h"
#include "tf_popef_op/runtime/cc/core/executable.h"

namespace tfpopef {

class Executable::Parser {
 public:
  explicit Parser(Executable& exe) : exe_(exe), src_(exe.source()) {}
  // Every step below, in this order.
  void Run();

 private:
  // ---- reading the JSON blobs
  nlohmann::json ParseJson(BlobType type);
  static DType ParseDType(const JsonObject& o, const std::string& key);

  // ---- Metadata: device requirements, then the anchors (names, aliases, dtypes, shapes)
  void ParseMetadataHeader(const JsonObject& meta);
  void ParseAnchors(const JsonObject& meta);
  void AddAnchorName(const std::string& name, int index, const std::string& where);

  // ---- Executable: version and memory sizes, then the tensors and where each lives
  void ParseExecutableHeader(const JsonObject& prog, const JsonObject& meta);
  void ParseTensors(const JsonObject& prog);
  // A weight or arena tensor: its offset is aligned and it fits in its region.
  void PlaceDeviceTensor(const JsonObject& o, ExecTensor& t) const;
  // An input or output tensor: bound to exactly one anchor of the same direction, dtype and shape.
  void BindAnchorTensor(const JsonObject& o, ExecTensor& t, std::set<int>& anchors_with_tensor) const;

  // ---- programs and their steps
  int FindProgram(const std::string& name) const;
  std::vector<std::string> ProgramNames() const;
  int RequireProgram(const JsonObject& o, const std::string& key, const std::string& name) const;
  int TensorIndex(const JsonObject& o, const std::string& key, int64_t id) const;
  void ParsePrograms(const JsonObject& prog);
  Step ParseStep(const JsonObject& o, const std::string& program, size_t index);
  void ParseSwitchStep(const JsonObject& o, Step& s) const;
  void ParseLoadTensorDataStep(const JsonObject& o, Step& s) const;
  void ParseKernelStep(const JsonObject& o, Step& s, const std::string& program, size_t index) const;
  // Metadata.tensor_data describes each TensorData blob; when an entry exists it must agree.
  void CheckTensorDataTable(const std::string& name, const PopefBlob& blob) const;

  // ---- program flow (load programs, the main program) and the subgraphs
  void ParseFlows(const JsonObject& meta);
  void ParseSubgraphs(const JsonObject& prog);

  // ---- whole-executable checks, once everything is read (the last one: the arena plan)
  void CheckStructure();
  // Switch steps only in the main program, LoadTensorData steps only in load programs.
  void CheckStepPlacement() const;
  // A fused executable's main program is one Switch over the subgraphs' programs (its index
  // anchor is then taken out of the subgraphs' inputs); a single model's subgraph runs main.
  void CheckSubgraphSelection();
  // Every anchor is listed by a subgraph, and by its own one when Metadata names it.
  void CheckAnchorsBelongToSubgraphs() const;
  // A subgraph's program may only touch its own anchors (others are not bound when it runs),
  // and must write each of its outputs.
  void CheckSubgraphAnchorUse() const;

  // ---- the runnable parts
  void PrepareKernels();
  // High word: the program (metadata + executable JSON). Low word: every blob's type, name
  // and payload checksum (so different weights give a different hash) and the file size.
  void ComputeHash();

  [[noreturn]] void Fail(const std::string& what, ErrorCode code = ErrorCode::kInvalidArgument) const;

  Executable& exe_;
  const std::string src_;
  nlohmann::json meta_json_, prog_json_;
  std::unordered_map<int, int> tensor_by_id_;
  std::set<int> listed_;  // anchors listed by some subgraph
};

}  // namespace tfpopef
