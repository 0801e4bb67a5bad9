// An Executable bound to a Device: runs the Load program when needed and the Main program
// per batch.
//
// Everything a run needs is precomputed at construction (per-step tables saying where each
// kernel operand lives: an anchor slot, weight memory + offset, or arena + offset), so Run
// does no allocation and no string lookup: it fills pointer arrays and calls Kernel::Run.
//
// Ownership: shares the Executable; references the Device (owned by the DeviceManager);
// owns the kernel scratch buffer.
// Thread safety: Load and Run may be called from any thread; both hold the device lock for
// their whole duration, so one program runs at a time on a device (as on an IPU), even when
// several sessions share it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/core/aligned_buffer.h"
#include "tf_popef_op/runtime/cc/core/device.h"
#include "tf_popef_op/runtime/cc/core/executable.h"

namespace tfpopef {

class Session {
 public:
  Session(std::shared_ptr<const Executable> executable, Device& device);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Executable& executable() const { return *exe_; }
  Device& device() const { return device_; }

  // Loads the executable on the device unless the device already holds it.
  void Load();

  // Runs Main for one compiled batch of `subgraph`. `anchors[i]` is the buffer of anchor i
  // with its compiled shape; only the anchors of `subgraph` (and the fusion index, whose value
  // must be `subgraph`) are read. Input buffers are never written. Reloads the executable
  // first if another one replaced it on the device. Kernel errors propagate as Error.
  void Run(int subgraph, void* const* anchors);

 private:
  struct Operand {
    Storage storage;
    int anchor;       // input/output storage
    uint64_t offset;  // weight/arena storage
  };
  struct StepTable {
    std::vector<Operand> inputs, outputs;
    std::vector<const void*> input_ptrs;  // filled per run
    std::vector<void*> output_ptrs;
  };

  void LoadLocked();
  void RunProgram(int program, int subgraph, void* const* anchors);
  void* Resolve(const Operand& op, void* const* anchors) const;

  std::shared_ptr<const Executable> exe_;
  Device& device_;
  std::vector<std::vector<StepTable>> tables_;  // [program][step], mutated under the device lock
  AlignedBuffer scratch_;
};

}  // namespace tfpopef
