// The kernel interface. A kernel is created once per program step when an executable is
// loaded ("prepared" with the step's static tensor types and attributes, where all
// shape-dependent work is done) and then run once per batch.
//
// Adding an op = one file in kernels/ that ends with one TFPOPEF_REGISTER_KERNEL line.
//
// Thread safety: Kernel::Run is const and must be callable from several sessions at once;
// per-run temporary memory comes from KernelContext::scratch (size declared at prepare).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tf_popef_op/runtime/cc/base/dtype.h"
#include "tf_popef_op/runtime/cc/base/error.h"

namespace tfpopef {

// Read-only view of a step's "attrs" JSON object with typed getters. A missing attribute
// without a default, or one of the wrong type, raises an error naming the op and node.
//
// Every name asked for (Has or a getter) is recorded, in a record that copies of the Attrs
// share (the float16 adapter and fused kernels prepare on copies of the spec), so that
// KernelRegistry::Create can reject an attribute the kernel never read: a newer compiler's
// additive attribute may change results, and ignoring it would be silently wrong.
// Not thread-safe: a spec is prepared on one thread.
class Attrs {
 public:
  Attrs(const nlohmann::json& j, std::string where)
      : j_(j), where_(std::move(where)), read_(std::make_shared<std::set<std::string>>()) {}

  bool Has(const std::string& name) const {
    read_->insert(name);
    return j_.is_object() && j_.contains(name);
  }
  int64_t Int(const std::string& name) const { return Get<int64_t>(name); }
  int64_t Int(const std::string& name, int64_t def) const { return Has(name) ? Int(name) : def; }
  float Float(const std::string& name) const { return Get<float>(name); }
  float Float(const std::string& name, float def) const { return Has(name) ? Float(name) : def; }
  std::string String(const std::string& name) const { return Get<std::string>(name); }
  std::string String(const std::string& name, const std::string& def) const {
    return Has(name) ? String(name) : def;
  }
  std::vector<int64_t> Ints(const std::string& name) const { return Get<std::vector<int64_t>>(name); }
  std::vector<int64_t> Ints(const std::string& name, std::vector<int64_t> def) const {
    return Has(name) ? Ints(name) : def;
  }
  std::vector<float> Floats(const std::string& name) const { return Get<std::vector<float>>(name); }

  // The attributes present that no one has asked for (sorted).
  std::vector<std::string> Unread() const {
    std::vector<std::string> unread;
    if (j_.is_object())
      for (const auto& item : j_.items())
        if (!read_->count(item.key())) unread.push_back(item.key());
    return unread;
  }

 private:
  template <typename T>
  T Get(const std::string& name) const {
    if (!Has(name)) throw Error(ErrorCode::kInvalidArgument, where_ + ": missing attribute '" + name + "'");
    try {
      return j_.at(name).get<T>();
    } catch (const nlohmann::json::exception& e) {
      throw Error(ErrorCode::kInvalidArgument,
                  where_ + ": attribute '" + name + "' has the wrong type (" + e.what() + ")");
    }
  }
  const nlohmann::json& j_;
  std::string where_;
  std::shared_ptr<std::set<std::string>> read_;  // names asked for, shared by copies
};

// Everything a kernel factory may look at: static types of the step's tensors and its attrs.
struct KernelSpec {
  std::string op;    // e.g. "Add"
  std::string node;  // ONNX node name, for error messages
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  Attrs attrs;
  // constant_inputs[i]: input i is a weight, whose bytes stay the same for the life of the
  // loaded executable (empty: none known).
  std::vector<bool> constant_inputs = {};
  // The input whose bytes output 0 takes (the step's "in_place_input", docs/popef.md "Arena
  // plan"; -1: none). Only ops that allow it get one; the kernel checks it is the input it
  // supports in place.
  int in_place_input = -1;

  // "op 'Add' (node 'add_1')": prefix for error messages.
  std::string Where() const { return "op '" + op + "' (node '" + node + "')"; }
};

// Pointers bound for one run. Buffers are distinct unless the compiler placed an output at
// its input's offset (in-place view ops, or KernelSpec::in_place_input) or a Concat input at
// its slice of the output (docs/popef.md "Arena plan"); inputs are otherwise never written.
struct KernelContext {
  const void* const* inputs;
  void* const* outputs;
  void* scratch;  // at least Kernel::scratch_bytes(), 64-byte aligned
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void Run(const KernelContext& ctx) const = 0;
  // Temporary memory Run needs (e.g. float32 copies of float16 operands).
  virtual size_t scratch_bytes() const { return 0; }
};

// Throws Error(kUnimplemented / kInvalidArgument) naming spec.Where() when the dtype or
// attributes are unsupported.
using KernelFactory = std::function<std::unique_ptr<Kernel>(const KernelSpec&)>;

class KernelRegistry {
 public:
  static KernelRegistry& Get();
  void Register(const std::string& op, KernelFactory factory);
  bool Has(const std::string& op) const;
  std::vector<std::string> Ops() const;  // sorted
  // Prepares a kernel; unknown op -> Error(kUnimplemented) listing the registered ops; an
  // attribute the factory never asked for (Attrs::Unread) -> Error(kInvalidArgument).
  std::unique_ptr<Kernel> Create(const KernelSpec& spec) const;

 private:
  std::vector<std::pair<std::string, KernelFactory>> factories_;
};

namespace detail {
struct KernelRegistrar {
  KernelRegistrar(const char* op, KernelFactory factory) {
    KernelRegistry::Get().Register(op, std::move(factory));
  }
};
}  // namespace detail

#define TFPOPEF_CONCAT_INNER(a, b) a##b
#define TFPOPEF_CONCAT(a, b) TFPOPEF_CONCAT_INNER(a, b)
// Registers `factory` (callable: const KernelSpec& -> std::unique_ptr<Kernel>) for op `op`.
#define TFPOPEF_REGISTER_KERNEL(op, factory) \
  static ::tfpopef::detail::KernelRegistrar TFPOPEF_CONCAT(kernel_registrar_, __COUNTER__)(op, factory)

}  // namespace tfpopef
