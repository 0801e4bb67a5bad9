// An Executable bound to a Device: runs the Load program when needed and the Main program
// per batch.
//
// Everything a run needs is precomputed (per-step pointer tables): weight and arena operands
// are bound once per device load, so Run only writes the anchor operands (caller buffers) and
// calls Kernel::Run: no allocation, no string lookup, no switch per operand.
//
// Weights are used in place from the PopEF bytes (the reader's read-only mmap of the file, or
// its aligned copy of a caller buffer) whenever a weight tensor lies inside one LoadTensorData
// blob at a 64-byte aligned address: the Load program then copies nothing for it, and a reload
// after another executable used the device only re-binds pointers. Weights that cannot be
// mapped (misaligned, spanning blobs, overlapping loads) are copied into device memory as
// before. TF_POPEF_MMAP_WEIGHTS=0 turns mapping off (everything is copied).
//
// Profiling (set_profiling): each kernel step's calls and wall time, and each run's total, so
// the dispatch overhead is run time minus kernel time. Off, Run takes a branch-free path
// (a separate instantiation), so profiling costs nothing unless enabled.
//
// Ownership: shares the Executable (which keeps the PopefReader, hence the mapped weights,
// alive); references the Device (owned by the DeviceManager); owns the kernel scratch buffer.
// Thread safety: Load, Run, Profile and ResetProfile may be called from any thread; they hold
// the device lock, so one program runs at a time on a device (as on an IPU), even when several
// sessions share it. set_profiling may be called at any time (takes effect at the next Run).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/base/aligned_buffer.h"
#include "tf_popef_op/runtime/cc/core/device.h"
#include "tf_popef_op/runtime/cc/core/executable.h"

namespace tfpopef {

// One kernel step's profile.
struct StepProfile {
  std::string program;
  int step = 0;  // index in the program
  std::string op, node;
  uint64_t calls = 0;
  uint64_t total_ns = 0;
};

struct SessionProfile {
  uint64_t runs = 0;    // Main program runs while profiling
  uint64_t run_ns = 0;  // their total wall time (kernels + dispatch)
  std::vector<StepProfile> steps;  // kernel steps that ran at least once, in program order
};

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

  // Weight bytes used in place from the PopEF / copied into device memory by each load.
  uint64_t mapped_weights_bytes() const { return mapped_weights_bytes_; }
  uint64_t copied_weights_bytes() const { return copied_weights_bytes_; }

  void set_profiling(bool on) { profiling_.store(on, std::memory_order_relaxed); }
  bool profiling() const { return profiling_.load(std::memory_order_relaxed); }
  SessionProfile Profile() const;
  void ResetProfile();

 private:
  struct Operand {
    Storage storage;
    int anchor;             // input/output storage
    uint64_t offset;        // weight/arena storage
    const uint8_t* mapped;  // weight storage used in place from the PopEF; nullptr: device memory
  };
  struct AnchorSlot {
    int slot;    // index into input_ptrs / output_ptrs
    int anchor;  // index into the anchors of Run
  };
  struct StepTable {
    std::vector<Operand> inputs, outputs;
    std::vector<AnchorSlot> anchor_inputs, anchor_outputs;  // bound per run
    std::vector<const void*> input_ptrs;  // weight/arena entries bound per device load
    std::vector<void*> output_ptrs;
    uint64_t calls = 0, total_ns = 0;  // profile
  };
  struct LoadCopy {
    const uint8_t* src;
    uint64_t offset, nbytes;
  };

  std::vector<const uint8_t*> PlanWeights();
  void LoadLocked();
  void BindStorage();
  template <bool kProfile>
  void RunProgram(int program, int subgraph, void* const* anchors);
  void* Resolve(const Operand& op) const;

  std::shared_ptr<const Executable> exe_;
  Device& device_;
  std::vector<std::vector<StepTable>> tables_;  // [program][step], mutated under the device lock
  std::vector<LoadCopy> load_copies_;           // what a load copies into device memory
  uint64_t backed_weights_bytes_ = 0;           // device weight memory that must exist
  uint64_t mapped_weights_bytes_ = 0, copied_weights_bytes_ = 0;
  uint64_t bound_generation_ = 0;               // device load generation the tables are bound to
  AlignedBuffer scratch_;
  std::atomic<bool> profiling_{false};
  uint64_t profile_runs_ = 0, profile_run_ns_ = 0;  // under the device lock
};

}  // namespace tfpopef
