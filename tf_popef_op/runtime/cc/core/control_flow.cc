#include "tf_popef_op/runtime/cc/core/control_flow.h"

#include <cstring>
#include <memory>
#include <set>

namespace tfpopef {
namespace {

using TensorFn = std::function<int(const JsonObject&, const std::string&, int64_t)>;
using ProgramFn = std::function<int(const JsonObject&, const std::string&, const std::string&)>;

std::string Describe(const ExecTensor& t) {
  return "tensor " + std::to_string(t.id) + " ('" + t.name + "', " + DTypeName(t.desc.dtype) + " " +
         ShapeToString(t.desc.shape) + ")";
}

// A scalar-like (one element) tensor of dtype `dtype`.
int Scalar(const JsonObject& o, const std::string& key, int64_t id, DType dtype, const std::vector<ExecTensor>& tensors,
           const TensorFn& tensor) {
  const int t = tensor(o, key, id);
  if (tensors[t].desc.dtype != dtype || tensors[t].desc.numel() != 1)
    o.Fail(key, Describe(tensors[t]) + " must hold one " + DTypeName(dtype));
  return t;
}

// A tensor the step writes: arena, or an output anchor for the step's results.
int Writable(const JsonObject& o, const std::string& key, int64_t id, bool may_be_output,
             const std::vector<ExecTensor>& tensors, const TensorFn& tensor) {
  const int t = tensor(o, key, id);
  const Storage st = tensors[t].storage;
  if (st != Storage::kArena && !(may_be_output && st == Storage::kOutput))
    o.Fail(key, Describe(tensors[t]) + " has storage '" + StorageName(st) + "'; the step writes it, so it must be " +
                    (may_be_output ? "an arena or output tensor" : "an arena tensor"));
  return t;
}

void ParseIf(const JsonObject& o, Step& s, const std::vector<ExecTensor>& tensors, const TensorFn& tensor,
             const ProgramFn& program, ControlFlow& cf) {
  o.OnlyKnownKeys({"op", "name", "inputs", "outputs", "cond", "then", "else"}, "an If step");
  s.inputs.push_back(Scalar(o, "cond", o.Int("cond"), DType::kBool, tensors, tensor));
  for (int64_t id : o.Ints("outputs")) s.outputs.push_back(Writable(o, "outputs", id, true, tensors, tensor));
  cf.then_program = program(o, "then", o.String("then"));
  cf.else_program = program(o, "else", o.String("else"));
}

void ParseLoop(const JsonObject& o, Step& s, const std::vector<ExecTensor>& tensors, const TensorFn& tensor,
               const ProgramFn& program, ControlFlow& cf) {
  o.OnlyKnownKeys({"op", "name", "inputs", "outputs", "body", "max_trip_count", "trip_count", "cond", "iter_num",
                   "cond_in", "cond_out", "carried", "scan_outputs"},
                  "a Loop step");
  cf.body_program = program(o, "body", o.String("body"));
  cf.max_trip_count = o.IntOr("max_trip_count", -1, -1);
  const int64_t trip = o.IntOr("trip_count", -1, -1);
  const int64_t cond = o.IntOr("cond", -1, -1);
  cf.has_trip_count = trip >= 0;
  cf.has_cond = cond >= 0;
  if (cf.has_trip_count) s.inputs.push_back(Scalar(o, "trip_count", trip, DType::kInt64, tensors, tensor));
  if (cf.has_cond) s.inputs.push_back(Scalar(o, "cond", cond, DType::kBool, tensors, tensor));
  s.inputs.push_back(Scalar(o, "cond_out", o.Int("cond_out"), DType::kBool, tensors, tensor));
  s.outputs.push_back(Scalar(o, "iter_num", o.Int("iter_num"), DType::kInt64, tensors, tensor));
  s.outputs.push_back(Scalar(o, "cond_in", o.Int("cond_in"), DType::kBool, tensors, tensor));
  Writable(o, "iter_num", o.Int("iter_num"), false, tensors, tensor);
  Writable(o, "cond_in", o.Int("cond_in"), false, tensors, tensor);

  const auto& carried = o.Array("carried");
  std::vector<int> initials, body_outs, finals;
  for (size_t c = 0; c < carried.size(); ++c) {
    const std::string key = "carried[" + std::to_string(c) + "]";
    if (!carried[c].is_array() || carried[c].size() != 4)
      o.Fail(key, "expected [initial, body_in, body_out, final] tensor ids (final -1 when unused)");
    auto id = [&](size_t k) { return JsonObject::CheckedInt(carried[c][k], o.Path(key), -1, int64_t{1} << 30); };
    const int initial = tensor(o, key, id(0));
    const int body_in = Writable(o, key, id(1), false, tensors, tensor);
    const int body_out = tensor(o, key, id(2));
    const TensorDesc& want = tensors[body_in].desc;
    for (int t : {initial, body_out})
      if (tensors[t].desc.dtype != want.dtype || tensors[t].desc.shape != want.shape)
        o.Fail(key, Describe(tensors[t]) + " does not match the body input " + Describe(tensors[body_in]));
    if (body_out == body_in) o.Fail(key, "the body result must be a tensor of its own, not the body input");
    initials.push_back(initial);
    body_outs.push_back(body_out);
    s.outputs.push_back(body_in);
    cf.carried_bytes.push_back(want.nbytes());
    const int64_t final_id = id(3);
    cf.has_final.push_back(final_id >= 0);
    if (final_id >= 0) {
      const int final_t = Writable(o, key, final_id, true, tensors, tensor);
      if (tensors[final_t].desc.dtype != want.dtype || tensors[final_t].desc.shape != want.shape)
        o.Fail(key, Describe(tensors[final_t]) + " does not match the body input " + Describe(tensors[body_in]));
      finals.push_back(final_t);
    }
  }
  s.outputs.insert(s.outputs.end(), finals.begin(), finals.end());
  s.inputs.insert(s.inputs.end(), initials.begin(), initials.end());
  s.inputs.insert(s.inputs.end(), body_outs.begin(), body_outs.end());

  const auto& scans = o.Array("scan_outputs");
  if (!scans.empty() && (cf.has_trip_count || cf.max_trip_count < 0))
    o.Fail("scan_outputs", "scan outputs need a static length: max_trip_count >= 0 and no trip_count tensor");
  for (size_t k = 0; k < scans.size(); ++k) {
    const std::string key = "scan_outputs[" + std::to_string(k) + "]";
    if (!scans[k].is_array() || scans[k].size() != 2) o.Fail(key, "expected [body_out, output] tensor ids");
    const int item = tensor(o, key, JsonObject::CheckedInt(scans[k][0], o.Path(key), 0, int64_t{1} << 30));
    const int out = Writable(o, key, JsonObject::CheckedInt(scans[k][1], o.Path(key), 0, int64_t{1} << 30), true,
                             tensors, tensor);
    const TensorDesc& d = tensors[item].desc;
    std::vector<int64_t> want{cf.max_trip_count};
    want.insert(want.end(), d.shape.begin(), d.shape.end());
    if (tensors[out].desc.dtype != d.dtype || tensors[out].desc.shape != want)
      o.Fail(key, Describe(tensors[out]) + " must be " + DTypeName(d.dtype) + " " + ShapeToString(want) + ": " +
                      std::to_string(cf.max_trip_count) + " iterations of " + Describe(tensors[item]));
    s.inputs.push_back(item);
    s.outputs.push_back(out);
    cf.scan_item_bytes.push_back(d.nbytes());
  }
}

bool ReadBool(const void* p) { return *static_cast<const uint8_t*>(p) != 0; }

void CopyBytes(void* dst, const void* src, uint64_t n) {
  if (dst != src && n > 0) std::memmove(dst, src, n);
}

void RunLoop(const ControlFlow& cf, const void* const* in, void* const* out, const SubprogramRunner& run_program) {
  const size_t carried = cf.carried_bytes.size(), scans = cf.scan_item_bytes.size();
  size_t k = 0;
  int64_t trips = cf.max_trip_count;  // < 0: unbounded
  if (cf.has_trip_count) {
    int64_t m;
    std::memcpy(&m, in[k++], sizeof(m));
    trips = m < 0 ? 0 : m;  // ONNX: a negative trip count runs no iteration
  }
  bool cond = cf.has_cond ? ReadBool(in[k++]) : true;
  const void* cond_out = in[k++];
  const void* const* initials = in + k;
  const void* const* body_outs = initials + carried;
  const void* const* items = body_outs + carried;
  auto* iter_num = static_cast<int64_t*>(out[0]);
  auto* cond_in = static_cast<uint8_t*>(out[1]);
  void* const* body_ins = out + 2;
  void* const* finals = body_ins + carried;
  size_t num_finals = 0;
  for (bool f : cf.has_final) num_finals += f;
  void* const* scan_outputs = finals + num_finals;

  for (size_t c = 0; c < carried; ++c) CopyBytes(body_ins[c], initials[c], cf.carried_bytes[c]);
  int64_t i = 0;
  for (; (trips < 0 || i < trips) && cond; ++i) {
    *iter_num = i;
    *cond_in = cond ? 1 : 0;
    run_program(cf.body_program);
    cond = ReadBool(cond_out);
    // The plan gives body results bytes of their own, so these copies never overlap.
    for (size_t c = 0; c < carried; ++c) CopyBytes(body_ins[c], body_outs[c], cf.carried_bytes[c]);
    for (size_t s = 0; s < scans; ++s) {
      if (i >= cf.max_trip_count)
        throw Error(ErrorCode::kInternal, "Loop '" + cf.node + "': iteration " + std::to_string(i) +
                                              " is past its scan outputs' " + std::to_string(cf.max_trip_count) + " rows");
      std::memcpy(static_cast<uint8_t*>(scan_outputs[s]) + i * cf.scan_item_bytes[s], items[s], cf.scan_item_bytes[s]);
    }
  }
  if (scans > 0 && i != cf.max_trip_count)
    throw Error(ErrorCode::kInternal, "Loop '" + cf.node + "' stopped after " + std::to_string(i) +
                                          " iterations but its scan outputs have " + std::to_string(cf.max_trip_count) +
                                          " rows (the compiler only keeps scan outputs when the loop cannot stop early)");
  size_t f = 0;
  for (size_t c = 0; c < carried; ++c)
    if (cf.has_final[c]) CopyBytes(finals[f++], body_ins[c], cf.carried_bytes[c]);
}

}  // namespace

void ParseControlStep(const JsonObject& o, Step& s, const std::vector<ExecTensor>& tensors, const TensorFn& tensor,
                      const ProgramFn& program) {
  auto cf = std::make_shared<ControlFlow>();
  cf->node = o.Has("name") ? o.String("name") : "";
  s.node = cf->node;
  if (s.op == "If") {
    s.kind = Step::Kind::kIf;
    ParseIf(o, s, tensors, tensor, program, *cf);
  } else {
    s.kind = Step::Kind::kLoop;
    ParseLoop(o, s, tensors, tensor, program, *cf);
  }
  s.control = std::move(cf);
}

ControlOperands SplitControlOperands(const Step& step) {
  const ControlFlow& cf = *step.control;
  ControlOperands ops;
  if (!cf.is_loop()) {
    ops.enclosing = step.inputs;
    ops.enclosing.insert(ops.enclosing.end(), step.outputs.begin(), step.outputs.end());
    return ops;
  }
  // The operand orders of the file comment.
  const size_t carried = cf.carried_bytes.size(), scans = cf.scan_item_bytes.size();
  const auto& in = step.inputs;
  size_t k = 0;
  if (cf.has_trip_count) ops.enclosing.push_back(in[k++]);
  if (cf.has_cond) ops.enclosing.push_back(in[k++]);
  ops.body.push_back(in[k++]);  // cond_out
  ops.enclosing.insert(ops.enclosing.end(), in.begin() + k, in.begin() + k + carried);  // initial
  ops.body.insert(ops.body.end(), in.begin() + k + carried, in.begin() + k + 2 * carried + scans);  // body_out, items
  const auto& out = step.outputs;
  ops.body.insert(ops.body.end(), out.begin(), out.begin() + 2 + carried);  // iter_num, cond_in, body_in
  ops.enclosing.insert(ops.enclosing.end(), out.begin() + 2 + carried, out.end());  // finals, scan outputs
  return ops;
}

void CheckControlFlowPrograms(const std::string& source, const std::vector<Program>& programs) {
  // 0 unvisited, 1 on the current path, 2 done.
  std::vector<int> state(programs.size(), 0);
  std::function<void(int, std::vector<int>&)> visit = [&](int p, std::vector<int>& path) {
    state[p] = 1;
    path.push_back(p);
    for (const Step& s : programs[p].steps) {
      if (!s.control) continue;
      for (int sub : s.control->sub_programs()) {
        if (state[sub] == 1) {
          std::string cycle;
          for (int q : path) cycle += "'" + programs[q].name + "' -> ";
          throw Error(ErrorCode::kInvalidArgument,
                      source + ": control flow makes programs call themselves: " + cycle + "'" + programs[sub].name + "'");
        }
        for (const Step& t : programs[sub].steps)
          if (t.kind != Step::Kind::kKernel && !t.control)
            throw Error(ErrorCode::kInvalidArgument, source + ": program '" + programs[sub].name + "' is run by " +
                                                         s.op + " '" + s.node + "', so it may only hold kernel, If and "
                                                         "Loop steps; found '" + t.op + "'");
        if (state[sub] == 0) visit(sub, path);
      }
    }
    path.pop_back();
    state[p] = 2;
  };
  for (size_t p = 0; p < programs.size(); ++p) {
    std::vector<int> path;
    if (state[p] == 0) visit(static_cast<int>(p), path);
  }
}

std::vector<const Step*> StepsWithSubprograms(const std::vector<Program>& programs, int program) {
  std::vector<const Step*> out;
  for (const Step& s : programs[program].steps) {
    out.push_back(&s);
    if (!s.control) continue;
    for (int sub : s.control->sub_programs()) {
      std::vector<const Step*> nested = StepsWithSubprograms(programs, sub);
      out.insert(out.end(), nested.begin(), nested.end());
    }
  }
  return out;
}

void RunControlFlow(const Step& step, const void* const* inputs, void* const* outputs,
                    const SubprogramRunner& run_program) {
  const ControlFlow& cf = *step.control;
  if (!cf.is_loop()) {
    run_program(ReadBool(inputs[0]) ? cf.then_program : cf.else_program);
    return;
  }
  RunLoop(cf, inputs, outputs, run_program);
}

}  // namespace tfpopef
