// The process-wide table of ModelRunners used by PopefExecute kernels: one runner (so one
// parsed Executable, one device slot and one device thread) per PopEF file and runtime
// configuration, shared by every op instance, signature, session and thread of the process.
// That sharing is what lets concurrent calls meet in one runner's queues (cross-request
// batching) and keeps the seeds' "one executable per device" true.
//
// Ownership: kernels hold shared_ptrs; the table holds weak_ptrs, so a runner is closed (and
// its device slot released) when the last kernel using it is destroyed.
// Thread safety: Get may be called from any thread; creation is serialized so two threads
// never load the same PopEF twice.
#pragma once

#include <memory>
#include <string>

#include "tf_popef_op/runtime/cc/core/model_runner.h"
#include "tf_popef_op/runtime/cc/core/runtime_config.h"

namespace tfpopef {

class SharedRunners {
 public:
  // The runner for `popef_path` (resolved to its canonical path, so two spellings of one file
  // share it) under `config`, created on first use. Throws tfpopef::Error (kNotFound for a
  // missing file, the runtime's codes for a bad PopEF or an incompatible device).
  static std::shared_ptr<ModelRunner> Get(const std::string& popef_path, const RuntimeConfig& config);
  // Runners alive now (for tests and diagnostics).
  static size_t LiveCount();
};

}  // namespace tfpopef
