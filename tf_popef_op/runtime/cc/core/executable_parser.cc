#include "tf_popef_op/runtime/cc/core/executable_parser.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "tf_popef_op/runtime/cc/base/aligned_buffer.h"
#include "tf_popef_op/runtime/cc/core/arena_plan_check.h"
#include "tf_popef_op/runtime/cc/core/control_flow.h"

namespace tfpopef {
namespace {

// Version 2 = version 1 + the If and Loop steps (run-time control flow); the compiler writes 1
// when it emits neither, so older runtimes keep loading those executables.
constexpr int64_t kMinExecutableVersion = 1;
constexpr int64_t kExecutableVersion = 2;

std::string Join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

std::string AllDTypeNames() {
  std::string s;
  for (int i = 0; i <= static_cast<int>(DType::kBool); ++i)
    s += (i ? " " : "") + std::string(DTypeName(static_cast<DType>(i)));
  return s;
}

}  // namespace

void Executable::Parser::Run() {
  meta_json_ = ParseJson(BlobType::kMetadata);
  prog_json_ = ParseJson(BlobType::kExecutable);
  const JsonObject meta(meta_json_, src_ + ": Metadata");
  const JsonObject prog(prog_json_, src_ + ": Executable");
  ParseMetadataHeader(meta);
  ParseAnchors(meta);
  ParseExecutableHeader(prog, meta);
  ParseTensors(prog);
  ParsePrograms(prog);
  ParseFlows(meta);
  ParseSubgraphs(prog);
  CheckStructure();
  PrepareKernels();
  ComputeHash();
}

nlohmann::json Executable::Parser::ParseJson(BlobType type) {
  const PopefBlob& blob = exe_.popef_->Single(type);
  try {
    return nlohmann::json::parse(blob.view());
  } catch (const nlohmann::json::exception& e) {
    Fail(std::string(BlobTypeLabel(type)) + " blob '" + blob.name + "' is not valid JSON: " + e.what());
  }
}

DType Executable::Parser::ParseDType(const JsonObject& o, const std::string& key) {
  const std::string name = o.String(key);
  try {
    return DTypeFromName(name);
  } catch (const Error&) {
    o.Fail(key, "unknown dtype '" + name + "' (expected one of: " + AllDTypeNames() + ")");
  }
}

void Executable::Parser::ParseMetadataHeader(const JsonObject& meta) {
  exe_.ipu_version_ = meta.String("ipu_version");
  if (exe_.ipu_version_.empty()) meta.Fail("ipu_version", "must not be empty");
  exe_.producer_ = meta.Has("producer") ? meta.String("producer") : "";
  const int64_t num_ipus = meta.IntOr("num_ipus", 1, 1);
  const int64_t replicas = meta.IntOr("replication_factor", 1, 1);
  if (num_ipus != 1 || replicas != 1)
    Fail("the executable needs " + std::to_string(num_ipus) + " IPU(s) x replication factor " +
             std::to_string(replicas) + "; the emulator runs single-IPU, unreplicated executables",
         ErrorCode::kUnimplemented);
  if (!meta.Bool("is_inference", true))
    Fail("Metadata.is_inference is false; the emulator runs inference executables only", ErrorCode::kUnimplemented);
}

void Executable::Parser::ParseAnchors(const JsonObject& meta) {
  const auto& arr = meta.Array("anchors");
  for (size_t i = 0; i < arr.size(); ++i) {
    const JsonObject o(arr[i], meta.Path("anchors") + "[" + std::to_string(i) + "]");
    Anchor a;
    a.name = o.String("name");
    if (a.name.empty()) o.Fail("name", "must not be empty");
    a.desc.dtype = ParseDType(o, "dtype");
    a.desc.shape = o.Shape("shape");
    const std::string dir = o.String("direction");
    if (dir != "input" && dir != "output") o.Fail("direction", "expected \"input\" or \"output\", got \"" + dir + "\"");
    a.is_input = dir == "input";
    a.subgraph = o.Has("subgraph") ? static_cast<int>(o.Int("subgraph", 0, 1 << 20)) : -1;
    const int64_t rank = static_cast<int64_t>(a.desc.shape.size());
    a.batch_axis = static_cast<int>(o.IntOr("batch_axis", rank > 0 ? 0 : -1, -1, rank - 1));
    if (o.Has("aliases")) a.aliases = o.Strings("aliases");
    // Added before its names: a name listed twice by this anchor reports this anchor as the owner.
    const int index = static_cast<int>(exe_.anchors_.size());
    exe_.anchors_.push_back(std::move(a));
    const Anchor& added = exe_.anchors_.back();
    AddAnchorName(added.name, index, o.path());
    for (const std::string& n : added.aliases) AddAnchorName(n, index, o.path());
  }
}

void Executable::Parser::AddAnchorName(const std::string& name, int index, const std::string& where) {
  auto [it, inserted] = exe_.anchor_by_name_.emplace(name, index);
  if (!inserted)
    throw Error(ErrorCode::kInvalidArgument, where + ": name or alias '" + name + "' is already used by anchor '" +
                                                 exe_.anchors_[it->second].name + "'");
}

void Executable::Parser::ParseExecutableHeader(const JsonObject& prog, const JsonObject& meta) {
  const int64_t version = prog.Int("version");
  if (version < kMinExecutableVersion || version > kExecutableVersion)
    Fail("Executable version " + std::to_string(version) + " is not supported (this runtime supports " +
             std::to_string(kMinExecutableVersion) + " to " + std::to_string(kExecutableVersion) + ")",
         ErrorCode::kUnimplemented);
  constexpr int64_t kMaxBytes = int64_t{1} << 48;  // far above any device; keeps sums overflow-free
  exe_.weights_bytes_ = static_cast<uint64_t>(prog.Int("weights_bytes", 0, kMaxBytes));
  exe_.arena_bytes_ = static_cast<uint64_t>(prog.Int("arena_bytes", 0, kMaxBytes));
  if (meta.Has("device_memory")) {
    const JsonObject dm = meta.Object("device_memory");
    for (const auto& [key, value] : {std::pair<std::string, uint64_t>{"weights_bytes", exe_.weights_bytes_},
                                     std::pair<std::string, uint64_t>{"arena_bytes", exe_.arena_bytes_}}) {
      if (!dm.Has(key)) continue;
      const int64_t got = dm.Int(key, 0);
      if (static_cast<uint64_t>(got) != value)
        dm.Fail(key, std::to_string(got) + " disagrees with Executable." + key + " = " + std::to_string(value));
    }
  }
}

void Executable::Parser::ParseTensors(const JsonObject& prog) {
  const auto& arr = prog.Array("tensors");
  std::set<int> anchors_with_tensor;
  for (size_t i = 0; i < arr.size(); ++i) {
    const JsonObject o(arr[i], prog.Path("tensors") + "[" + std::to_string(i) + "]");
    ExecTensor t;
    t.id = static_cast<int>(o.Int("id", 0, 1 << 30));
    t.name = o.Has("name") ? o.String("name") : "t" + std::to_string(t.id);
    t.desc.dtype = ParseDType(o, "dtype");
    t.desc.shape = o.Shape("shape");
    const std::string storage = o.String("storage");
    if (storage == "input") t.storage = Storage::kInput;
    else if (storage == "output") t.storage = Storage::kOutput;
    else if (storage == "weight") t.storage = Storage::kWeight;
    else if (storage == "arena") t.storage = Storage::kArena;
    else o.Fail("storage", "expected one of input, output, weight, arena; got \"" + storage + "\"");
    if (t.storage == Storage::kWeight || t.storage == Storage::kArena)
      PlaceDeviceTensor(o, t);
    else
      BindAnchorTensor(o, t, anchors_with_tensor);
    if (!tensor_by_id_.emplace(t.id, static_cast<int>(exe_.tensors_.size())).second)
      o.Fail("id", "duplicate tensor id " + std::to_string(t.id));
    exe_.tensors_.push_back(std::move(t));
  }
}

void Executable::Parser::PlaceDeviceTensor(const JsonObject& o, ExecTensor& t) const {
  const bool weight = t.storage == Storage::kWeight;
  const uint64_t limit = weight ? exe_.weights_bytes_ : exe_.arena_bytes_;
  t.offset = static_cast<uint64_t>(o.Int("offset", 0, int64_t{1} << 48));
  if (t.offset % kDeviceAlignment != 0)
    o.Fail("offset", std::to_string(t.offset) + " is not " + std::to_string(kDeviceAlignment) + "-byte aligned");
  if (t.offset + t.desc.nbytes() > limit)
    o.Fail("offset", "tensor '" + t.name + "' (" + std::to_string(t.desc.nbytes()) + " bytes at offset " +
                         std::to_string(t.offset) + ") does not fit in " + (weight ? "weights_bytes" : "arena_bytes") +
                         " = " + std::to_string(limit));
}

void Executable::Parser::BindAnchorTensor(const JsonObject& o, ExecTensor& t, std::set<int>& anchors_with_tensor) const {
  const std::string anchor = o.String("anchor");
  auto it = exe_.anchor_by_name_.find(anchor);
  if (it == exe_.anchor_by_name_.end() || exe_.anchors_[it->second].name != anchor)
    o.Fail("anchor", "'" + anchor + "' is not an anchor name in Metadata.anchors");
  const Anchor& a = exe_.anchors_[it->second];
  if (a.is_input != (t.storage == Storage::kInput))
    o.Fail("anchor", "tensor has storage '" + std::string(StorageName(t.storage)) + "' but anchor '" + anchor + "' is an " +
                         (a.is_input ? "input" : "output"));
  if (a.desc.dtype != t.desc.dtype || a.desc.shape != t.desc.shape)
    o.Fail("anchor", "tensor is " + std::string(DTypeName(t.desc.dtype)) + " " + ShapeToString(t.desc.shape) +
                         " but anchor '" + anchor + "' is " + DTypeName(a.desc.dtype) + " " +
                         ShapeToString(a.desc.shape));
  if (!anchors_with_tensor.insert(it->second).second)
    o.Fail("anchor", "anchor '" + anchor + "' is bound to more than one tensor");
  t.anchor = it->second;
}

int Executable::Parser::FindProgram(const std::string& name) const {
  for (size_t i = 0; i < exe_.programs_.size(); ++i)
    if (exe_.programs_[i].name == name) return static_cast<int>(i);
  return -1;
}

std::vector<std::string> Executable::Parser::ProgramNames() const {
  std::vector<std::string> names;
  for (const auto& p : exe_.programs_) names.push_back(p.name);
  return names;
}

int Executable::Parser::RequireProgram(const JsonObject& o, const std::string& key, const std::string& name) const {
  const int p = FindProgram(name);
  if (p < 0) o.Fail(key, "program '" + name + "' does not exist (programs: " + Join(ProgramNames()) + ")");
  return p;
}

int Executable::Parser::TensorIndex(const JsonObject& o, const std::string& key, int64_t id) const {
  auto it = tensor_by_id_.find(static_cast<int>(id));
  if (id < 0 || id > (1 << 30) || it == tensor_by_id_.end())
    o.Fail(key, "tensor id " + std::to_string(id) + " is not in Executable.tensors");
  return it->second;
}

void Executable::Parser::ParsePrograms(const JsonObject& prog) {
  const JsonObject programs = prog.Object("programs");
  const auto& obj = prog.Required("programs");
  for (auto it = obj.begin(); it != obj.end(); ++it) exe_.programs_.push_back(Program{it.key(), {}});
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string path = programs.Path(it.key());
    if (!it.value().is_array())
      throw Error(ErrorCode::kInvalidArgument, path + ": expected a JSON array of steps, got " + JsonObject::Dump(it.value()));
    Program& program = exe_.programs_[FindProgram(it.key())];
    for (size_t j = 0; j < it.value().size(); ++j)
      program.steps.push_back(ParseStep(JsonObject(it.value()[j], path + "[" + std::to_string(j) + "]"), program.name, j));
  }
}

Step Executable::Parser::ParseStep(const JsonObject& o, const std::string& program, size_t index) {
  Step s;
  s.op = o.String("op");
  if (s.op == "Switch") {
    ParseSwitchStep(o, s);
  } else if (s.op == "If" || s.op == "Loop") {
    ParseControlStep(
        o, s, exe_.tensors_, [this](const JsonObject& j, const std::string& k, int64_t id) { return TensorIndex(j, k, id); },
        [this](const JsonObject& j, const std::string& k, const std::string& n) { return RequireProgram(j, k, n); });
    if (s.node.empty()) s.node = program + "#" + std::to_string(index);
  } else if (s.op == "LoadTensorData") {
    ParseLoadTensorDataStep(o, s);
  } else {
    ParseKernelStep(o, s, program, index);
  }
  return s;
}

void Executable::Parser::ParseSwitchStep(const JsonObject& o, Step& s) const {
  s.kind = Step::Kind::kSwitch;
  o.OnlyKnownKeys({"op", "index_anchor", "cases"}, "a Switch step");
  const std::string anchor = o.String("index_anchor");
  const int a = exe_.FindAnchor(anchor);
  if (a < 0) o.Fail("index_anchor", "'" + anchor + "' is not an anchor in Metadata.anchors");
  const Anchor& idx = exe_.anchors_[a];
  if (!idx.is_input || !IsInteger(idx.desc.dtype) || idx.desc.numel() != 1 || idx.desc.shape.size() > 1)
    o.Fail("index_anchor", "anchor '" + anchor + "' must be an integer input of shape [] or [1], got " +
                               (idx.is_input ? "input " : "output ") + DTypeName(idx.desc.dtype) + " " +
                               ShapeToString(idx.desc.shape));
  if (idx.subgraph != -1)
    o.Fail("index_anchor", "anchor '" + anchor + "' selects the subgraph, so its Metadata subgraph must be null");
  s.index_anchor = a;
  for (const std::string& c : o.Strings("cases")) s.cases.push_back(RequireProgram(o, "cases", c));
  if (s.cases.empty()) o.Fail("cases", "a Switch needs at least one case");
}

void Executable::Parser::ParseLoadTensorDataStep(const JsonObject& o, Step& s) const {
  s.kind = Step::Kind::kLoadTensorData;
  o.OnlyKnownKeys({"op", "tensor_data", "offset", "nbytes"}, "a LoadTensorData step");
  const std::string name = o.String("tensor_data");
  s.tensor_data = exe_.popef_->FindTensorData(name);
  if (s.tensor_data == nullptr) o.Fail("tensor_data", "the file has no TensorData blob '" + name + "'");
  s.offset = static_cast<uint64_t>(o.Int("offset", 0, int64_t{1} << 48));
  s.nbytes = static_cast<uint64_t>(o.Int("nbytes", 0, int64_t{1} << 48));
  if (s.nbytes != s.tensor_data->payload_size)
    o.Fail("nbytes", std::to_string(s.nbytes) + " but TensorData '" + name + "' has " +
                         std::to_string(s.tensor_data->payload_size) + " bytes");
  if (s.offset + s.nbytes > exe_.weights_bytes_)
    o.Fail("offset", "TensorData '" + name + "' (" + std::to_string(s.nbytes) + " bytes at offset " +
                         std::to_string(s.offset) + ") does not fit in weights_bytes = " +
                         std::to_string(exe_.weights_bytes_));
  CheckTensorDataTable(name, *s.tensor_data);
  s.node = name;
}

void Executable::Parser::ParseKernelStep(const JsonObject& o, Step& s, const std::string& program, size_t index) const {
  s.kind = Step::Kind::kKernel;
  o.OnlyKnownKeys({"op", "name", "inputs", "outputs", "attrs", "in_place_input"}, "a kernel step");
  s.node = o.Has("name") ? o.String("name") : program + "#" + std::to_string(index);
  const auto ins = o.Ints("inputs");
  const auto outs = o.Ints("outputs");
  for (int64_t id : ins) s.inputs.push_back(TensorIndex(o, "inputs", id));
  for (int64_t id : outs) {
    const int t = TensorIndex(o, "outputs", id);
    const Storage st = exe_.tensors_[t].storage;
    if (st != Storage::kArena && st != Storage::kOutput)
      o.Fail("outputs", "tensor " + std::to_string(id) + " ('" + exe_.tensors_[t].name + "') has storage '" +
                            StorageName(st) + "'; a kernel may only write arena or output tensors");
    s.outputs.push_back(t);
  }
  if (o.Has("attrs")) JsonObject(o.Required("attrs"), o.Path("attrs"));  // must be an object
  if (o.Has("in_place_input")) {
    // Ops whose kernel reads each element of the input before it writes that element of
    // output 0 (the kernel checks which input it takes: NchwcConv's residual Sum).
    if (s.op != "NchwcConv") o.Fail("in_place_input", "op '" + s.op + "' does not take an input in place");
    s.in_place_input = static_cast<int>(o.Int("in_place_input", 0, static_cast<int64_t>(s.inputs.size()) - 1));
    if (s.outputs.empty()) o.Fail("in_place_input", "the step has no output");
    const ExecTensor &in = exe_.tensors_[s.inputs[s.in_place_input]], &out = exe_.tensors_[s.outputs[0]];
    if (in.desc.dtype != out.desc.dtype || in.desc.shape != out.desc.shape)
      o.Fail("in_place_input", "input '" + in.name + "' " + ShapeToString(in.desc.shape) + " and output '" + out.name +
                                   "' " + ShapeToString(out.desc.shape) + " differ in shape or dtype");
  }
}

void Executable::Parser::CheckTensorDataTable(const std::string& name, const PopefBlob& blob) const {
  const JsonObject meta(meta_json_, src_ + ": Metadata");
  if (!meta.Has("tensor_data")) return;
  const auto& arr = meta.Array("tensor_data");
  for (size_t i = 0; i < arr.size(); ++i) {
    const JsonObject o(arr[i], meta.Path("tensor_data") + "[" + std::to_string(i) + "]");
    if (o.String("name") != name) continue;
    TensorDesc d{ParseDType(o, "dtype"), o.Shape("shape")};
    if (d.nbytes() != blob.payload_size || static_cast<uint64_t>(o.IntOr("nbytes", d.nbytes(), 0)) != blob.payload_size)
      o.Fail("nbytes", "TensorData '" + name + "' has " + std::to_string(blob.payload_size) + " bytes but " +
                           DTypeName(d.dtype) + " " + ShapeToString(d.shape) + " needs " + std::to_string(d.nbytes()));
  }
}

void Executable::Parser::ParseFlows(const JsonObject& meta) {
  std::vector<std::string> load, main;
  if (meta.Has("program_flow")) {
    const JsonObject flow = meta.Object("program_flow");
    load = flow.Has("load") ? flow.Strings("load") : std::vector<std::string>{};
    main = flow.Strings("main");
    for (const auto& n : load) RequireProgram(flow, "load", n);
    for (const auto& n : main) RequireProgram(flow, "main", n);
    if (main.size() != 1) flow.Fail("main", "expected exactly one main program, got " + std::to_string(main.size()));
  } else {
    if (FindProgram("load") >= 0) load.push_back("load");
    main.push_back("main");
    if (FindProgram("main") < 0) Fail("Executable.programs has no 'main' program");
  }
  for (const auto& n : load) {
    const int p = FindProgram(n);
    for (const Step& s : exe_.programs_[p].steps)
      if (s.kind != Step::Kind::kLoadTensorData)
        Fail("load program '" + n + "' may only contain LoadTensorData steps, found '" + s.op + "'");
    exe_.load_flow_.push_back(p);
  }
  exe_.main_program_ = FindProgram(main[0]);
}

void Executable::Parser::ParseSubgraphs(const JsonObject& prog) {
  const auto& arr = prog.Array("subgraphs");
  if (arr.empty()) prog.Fail("subgraphs", "an executable needs at least one subgraph");
  for (size_t i = 0; i < arr.size(); ++i) {
    const JsonObject o(arr[i], prog.Path("subgraphs") + "[" + std::to_string(i) + "]");
    Subgraph sg;
    sg.index = static_cast<int>(o.Int("index", static_cast<int64_t>(i), static_cast<int64_t>(i)));
    sg.name = o.Has("name") ? o.String("name") : "graph" + std::to_string(i);
    sg.program = RequireProgram(o, "program", o.String("program"));
    sg.batch_size = o.Int("batch_size", 1, int64_t{1} << 40);
    sg.batch_axis = static_cast<int>(o.Int("batch_axis", -1, 64));
    for (const char* key : {"inputs", "outputs"}) {
      const bool inputs = std::string(key) == "inputs";
      for (const std::string& name : o.Strings(key)) {
        auto it = exe_.anchor_by_name_.find(name);
        if (it == exe_.anchor_by_name_.end() || exe_.anchors_[it->second].name != name)
          o.Fail(key, "'" + name + "' is not an anchor name in Metadata.anchors");
        const Anchor& a = exe_.anchors_[it->second];
        if (a.is_input != inputs)
          o.Fail(key, "anchor '" + name + "' is an " + (a.is_input ? "input" : "output") + " anchor");
        if (a.subgraph != -1 && a.subgraph != static_cast<int>(i))
          o.Fail(key, "anchor '" + name + "' belongs to subgraph " + std::to_string(a.subgraph) + " in Metadata");
        listed_.insert(it->second);
        (inputs ? sg.inputs : sg.outputs).push_back(it->second);
        // The batch sizes queues and splits requests, so it must be the one the shapes say.
        if (a.batch_axis >= 0 && (a.batch_axis != sg.batch_axis || a.desc.shape[a.batch_axis] != sg.batch_size))
          o.Fail("batch_size", std::to_string(sg.batch_size) + " on batch_axis " + std::to_string(sg.batch_axis) +
                                   " disagrees with anchor '" + name + "' " + ShapeToString(a.desc.shape) +
                                   " (batch axis " + std::to_string(a.batch_axis) + ")");
      }
    }
    exe_.subgraphs_.push_back(std::move(sg));
  }
}

void Executable::Parser::CheckStructure() {
  CheckControlFlowPrograms(src_, exe_.programs_);
  CheckStepPlacement();
  CheckSubgraphSelection();
  CheckAnchorsBelongToSubgraphs();
  CheckSubgraphAnchorUse();
  std::vector<int> roots;
  for (const Subgraph& sg : exe_.subgraphs_) roots.push_back(sg.program);
  CheckArenaPlan(src_, exe_.tensors_, exe_.programs_, roots);
}

void Executable::Parser::CheckStepPlacement() const {
  const Program& main = exe_.programs_[exe_.main_program_];
  for (const Program& p : exe_.programs_)
    for (const Step& s : p.steps) {
      if (s.kind == Step::Kind::kSwitch && &p != &main)
        Fail("program '" + p.name + "': a Switch step may only appear in the main program '" + main.name + "'");
      if (s.kind == Step::Kind::kLoadTensorData && std::find(exe_.load_flow_.begin(), exe_.load_flow_.end(),
                                                              &p - exe_.programs_.data()) == exe_.load_flow_.end())
        Fail("program '" + p.name + "': LoadTensorData steps belong in a load program");
    }
}

void Executable::Parser::CheckSubgraphSelection() {
  const Program& main = exe_.programs_[exe_.main_program_];
  const auto& subgraphs = exe_.subgraphs_;
  const bool has_switch = std::any_of(main.steps.begin(), main.steps.end(),
                                      [](const Step& s) { return s.kind == Step::Kind::kSwitch; });
  if (has_switch) {
    if (main.steps.size() != 1)
      Fail("main program '" + main.name + "' of a fused executable must be exactly one Switch step");
    const Step& sw = main.steps[0];
    if (sw.cases.size() != subgraphs.size())
      Fail("the Switch in '" + main.name + "' has " + std::to_string(sw.cases.size()) + " cases but there are " +
           std::to_string(subgraphs.size()) + " subgraphs");
    for (size_t i = 0; i < subgraphs.size(); ++i)
      if (sw.cases[i] != subgraphs[i].program)
        Fail("Switch case " + std::to_string(i) + " runs program '" + exe_.programs_[sw.cases[i]].name +
             "' but subgraph " + std::to_string(i) + " has program '" + exe_.programs_[subgraphs[i].program].name + "'");
    exe_.index_anchor_ = sw.index_anchor;
    // The index is fed with every request and handled by the runner, not by a subgraph.
    for (Subgraph& sg : exe_.subgraphs_)
      sg.inputs.erase(std::remove(sg.inputs.begin(), sg.inputs.end(), sw.index_anchor), sg.inputs.end());
  } else {
    if (subgraphs.size() != 1)
      Fail("there are " + std::to_string(subgraphs.size()) +
           " subgraphs but the main program has no Switch step to choose between them");
    if (subgraphs[0].program != exe_.main_program_)
      Fail("subgraph 0 has program '" + exe_.programs_[subgraphs[0].program].name +
           "' but a single-model executable runs the main program '" + main.name + "'");
  }
}

void Executable::Parser::CheckAnchorsBelongToSubgraphs() const {
  const auto& subgraphs = exe_.subgraphs_;
  for (size_t a = 0; a < exe_.anchors_.size(); ++a) {
    const Anchor& anchor = exe_.anchors_[a];
    if (static_cast<int>(a) == exe_.index_anchor_) continue;
    if (anchor.subgraph >= static_cast<int>(subgraphs.size()))
      Fail("Metadata anchor '" + anchor.name + "' has subgraph " + std::to_string(anchor.subgraph) + " but there are " +
           std::to_string(subgraphs.size()) + " subgraphs");
    if (!listed_.count(static_cast<int>(a)))
      Fail("anchor '" + anchor.name + "' is not listed in the inputs/outputs of any subgraph");
    if (anchor.subgraph >= 0) {
      const Subgraph& sg = subgraphs[anchor.subgraph];
      const auto& list = anchor.is_input ? sg.inputs : sg.outputs;
      if (std::find(list.begin(), list.end(), static_cast<int>(a)) == list.end())
        Fail("anchor '" + anchor.name + "' belongs to subgraph " + std::to_string(anchor.subgraph) +
             " in Metadata but is not listed in that subgraph's " + (anchor.is_input ? "inputs" : "outputs"));
    }
  }
}

void Executable::Parser::CheckSubgraphAnchorUse() const {
  const auto& subgraphs = exe_.subgraphs_;
  for (const Subgraph& sg : subgraphs) {
    std::set<int> own(sg.inputs.begin(), sg.inputs.end());
    own.insert(sg.outputs.begin(), sg.outputs.end());
    if (exe_.index_anchor_ >= 0) own.insert(exe_.index_anchor_);
    std::set<int> written;
    const Program& p = exe_.programs_[sg.program];
    for (const Step* step : StepsWithSubprograms(exe_.programs_, sg.program)) {
      const Step& s = *step;
      for (const auto* list : {&s.inputs, &s.outputs})
        for (int t : *list) {
          const ExecTensor& tensor = exe_.tensors_[t];
          if (tensor.anchor >= 0 && !own.count(tensor.anchor))
            Fail("program '" + p.name + "' step '" + s.node + "' uses anchor '" + exe_.anchors_[tensor.anchor].name +
                 "', which is not an anchor of subgraph " + std::to_string(sg.index));
        }
      for (int t : s.outputs)
        if (exe_.tensors_[t].anchor >= 0) written.insert(exe_.tensors_[t].anchor);
    }
    for (int a : sg.outputs)
      if (!written.count(a))
        Fail("output anchor '" + exe_.anchors_[a].name + "' of subgraph " + std::to_string(sg.index) +
             " is never written by program '" + p.name + "'");
  }
}

void Executable::Parser::PrepareKernels() {
  static const nlohmann::json kNoAttrs = nlohmann::json::object();
  const auto& programs_json = prog_json_.at("programs");
  for (Program& p : exe_.programs_) {
    const auto& steps_json = programs_json.at(p.name);
    for (size_t j = 0; j < p.steps.size(); ++j) {
      Step& s = p.steps[j];
      if (s.kind != Step::Kind::kKernel) continue;
      const auto& sj = steps_json[j];
      const nlohmann::json& attrs = sj.contains("attrs") ? sj.at("attrs") : kNoAttrs;
      std::vector<TensorDesc> ins, outs;
      for (int t : s.inputs) ins.push_back(exe_.tensors_[t].desc);
      for (int t : s.outputs) outs.push_back(exe_.tensors_[t].desc);
      const std::string where = "op '" + s.op + "' (node '" + s.node + "')";
      KernelSpec spec{s.op, s.node, std::move(ins), std::move(outs), Attrs(attrs, where)};
      for (int t : s.inputs) spec.constant_inputs.push_back(exe_.tensors_[t].storage == Storage::kWeight);
      spec.in_place_input = s.in_place_input;
      try {
        s.kernel = KernelRegistry::Get().Create(spec);
      } catch (const Error& e) {
        throw Error(e.code(), src_ + ": program '" + p.name + "' step #" + std::to_string(j) + ": " + e.what());
      } catch (const std::exception& e) {
        throw Error(ErrorCode::kInternal,
                    src_ + ": program '" + p.name + "' step #" + std::to_string(j) + ": " + where + ": " + e.what());
      }
      if (!s.kernel)
        Fail("program '" + p.name + "': the kernel factory for " + where + " returned nothing", ErrorCode::kInternal);
      exe_.scratch_bytes_ = std::max(exe_.scratch_bytes_, s.kernel->scratch_bytes());
    }
  }
}

void Executable::Parser::ComputeHash() {
  const std::string_view meta = exe_.popef_->MetadataJson(), prog = exe_.popef_->ExecutableJson();
  const uint32_t hi = Crc32(Crc32(0, meta.data(), meta.size()), prog.data(), prog.size());
  uint32_t lo = 0;
  for (const PopefBlob& b : exe_.popef_->blobs()) {
    const uint16_t type = static_cast<uint16_t>(b.type);
    lo = Crc32(lo, &type, sizeof(type));
    lo = Crc32(lo, b.name.data(), b.name.size());
    lo = Crc32(lo, &b.payload_crc32, sizeof(b.payload_crc32));
  }
  const uint64_t size = exe_.popef_->size();
  lo = Crc32(lo, &size, sizeof(size));
  exe_.hash_ = (static_cast<uint64_t>(hi) << 32) | lo;
}

void Executable::Parser::Fail(const std::string& what, ErrorCode code) const {
  throw Error(code, src_ + ": " + what);
}

}  // namespace tfpopef
