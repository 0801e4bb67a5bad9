// Options of a ModelRunner (PopRT's RuntimeConfig; Python uses the same snake_case names).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tfpopef {

// TF_POPEF_PROFILE=1 (any value but "" and "0") turns profiling on by default.
inline bool ProfileFromEnvironment() {
  const char* v = std::getenv("TF_POPEF_PROFILE");
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

struct RuntimeConfig {
  static constexpr uint32_t kBatchingOff = 0xFFFFFFFFu;

  // How long the device thread waits, from the moment a batch gets its first row, for more
  // requests to fill it before running it zero-padded. Only used with dynamic batching.
  int64_t timeout_ns = 5'000'000;
  // The axis of every anchor that carries the batch. kBatchingOff: requests must use the
  // subgraph's batch axis with a positive multiple of the compiled batch size. Otherwise any
  // batch n >= 1 is accepted, zero-padded to a multiple of the compiled batch, and rows of
  // consecutive requests are packed into shared batches.
  uint32_t batching_dim = kBatchingOff;
  // true: a request must feed exactly the selected subgraph's inputs (plus `index` for fused
  // executables). false: anchors of other subgraphs are ignored, as PopRT requires for fusion.
  bool validate_io_params = true;
  // Each anchor queue holds ring_buffer_size_multiplier x batch_size requests before
  // producers block.
  uint32_t ring_buffer_size_multiplier = 2;
  // true: several threads may call Execute concurrently. false: the caller guarantees a single
  // submitting thread (saves a mutex per request).
  bool thread_safe = true;
  // -1: pick a device automatically; otherwise the id of the device to use.
  int device_id = -1;
  // How long a waiting thread spins before it sleeps: the device thread waiting for the next
  // request, and a synchronous Execute waiting for its result. A short request then completes
  // without futex wake-ups and context switches; 0 never spins (saves CPU on idle runners).
  int64_t spin_ns = 20'000;
  // Per-op profiling: each kernel step's calls and time (ModelRunner::Profile). Off, it costs
  // nothing on the execute path. Default: TF_POPEF_PROFILE.
  bool profile = ProfileFromEnvironment();

  std::string ToString() const {
    return "RuntimeConfig(timeout_ns=" + std::to_string(timeout_ns) + ", batching_dim=" +
           (batching_dim == kBatchingOff ? std::string("0xFFFFFFFF") : std::to_string(batching_dim)) +
           ", validate_io_params=" + (validate_io_params ? "True" : "False") +
           ", ring_buffer_size_multiplier=" + std::to_string(ring_buffer_size_multiplier) +
           ", thread_safe=" + (thread_safe ? "True" : "False") + ", device_id=" + std::to_string(device_id) +
           ", spin_ns=" + std::to_string(spin_ns) + ", profile=" + (profile ? "True" : "False") + ")";
  }
};

}  // namespace tfpopef
