#include <algorithm>

#include "tf_popef_op/runtime/cc/kernels/kernel.h"

namespace tfpopef {

KernelRegistry& KernelRegistry::Get() {
  static KernelRegistry registry;  // constructed on first use, before any registrar runs
  return registry;
}

void KernelRegistry::Register(const std::string& op, KernelFactory factory) {
  if (Has(op)) throw Error(ErrorCode::kInternal, "kernel for op '" + op + "' registered twice");
  factories_.emplace_back(op, std::move(factory));
}

bool KernelRegistry::Has(const std::string& op) const {
  return std::any_of(factories_.begin(), factories_.end(), [&](const auto& f) { return f.first == op; });
}

std::vector<std::string> KernelRegistry::Ops() const {
  std::vector<std::string> ops;
  for (const auto& f : factories_) ops.push_back(f.first);
  std::sort(ops.begin(), ops.end());
  return ops;
}

namespace {

// An attribute the kernel never read is one this runtime does not know: a newer compiler
// added it (minor versions are additive), and running without it could be silently wrong.
void CheckAllAttrsRead(const KernelSpec& spec) {
  const std::vector<std::string> unread = spec.attrs.Unread();
  if (unread.empty()) return;
  std::string names;
  for (const std::string& name : unread) names += (names.empty() ? "'" : ", '") + name + "'";
  throw Error(ErrorCode::kInvalidArgument,
              spec.Where() + ": unknown attribute" + (unread.size() > 1 ? "s " : " ") + names +
                  ", which this runtime's kernel does not read; the PopEF was written by a newer compiler: "
                  "load it with a runtime that matches that compiler (or recompile the model)");
}

}  // namespace

std::unique_ptr<Kernel> KernelRegistry::Create(const KernelSpec& spec) const {
  for (const auto& f : factories_) {
    if (f.first != spec.op) continue;
    std::unique_ptr<Kernel> kernel = f.second(spec);
    CheckAllAttrsRead(spec);
    return kernel;
  }
  std::string known;
  for (const auto& op : Ops()) known += (known.empty() ? "" : ", ") + op;
  throw Error(ErrorCode::kUnimplemented,
              spec.Where() + ": no emulator kernel for this op (supported: " + known + ")");
}

}  // namespace tfpopef
