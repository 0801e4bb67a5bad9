#include "tf_popef_op/runtime/cc/core/device.h"

#include <algorithm>

#include "tf_popef_op/runtime/cc/base/error.h"

namespace tfpopef {

bool Device::Holds(uint64_t hash) const {
  std::lock_guard<std::mutex> l(stats_mu_);
  return stats_.has_executable && stats_.loaded_hash == hash;
}

void Device::PrepareLoad(uint64_t weights_bytes, uint64_t arena_bytes, uint64_t backed_weights_bytes) {
  const uint64_t needed = AlignUp(weights_bytes) + arena_bytes;
  if (needed > memory_bytes_)
    throw Error(ErrorCode::kFailedPrecondition, "the executable needs " + std::to_string(needed) +
                                                    " bytes of device memory but " + Describe() + " has " +
                                                    std::to_string(memory_bytes_) + " bytes");
  {
    std::lock_guard<std::mutex> l(stats_mu_);
    had_executable_ = stats_.has_executable;
    stats_.has_executable = false;  // a failed load leaves the device empty, never half-loaded
  }
  ++load_generation_;
  // Reallocate only when growing: switching executables should cost the copy, not malloc.
  // At least one aligned block, so even an empty region has a valid base pointer.
  const uint64_t weights_size = std::max<uint64_t>(backed_weights_bytes, kDeviceAlignment);
  const uint64_t arena_size = std::max<uint64_t>(arena_bytes, kDeviceAlignment);
  if (weights_.size() < weights_size) weights_.Resize(weights_size);
  if (arena_.size() < arena_size) arena_.Resize(arena_size);
}

void Device::FinishLoad(uint64_t hash, int64_t elapsed_ns) {
  std::lock_guard<std::mutex> l(stats_mu_);
  stats_.has_executable = true;
  stats_.loaded_hash = hash;
  ++stats_.load_count;
  if (had_executable_) ++stats_.reload_count;
  stats_.total_load_ns += elapsed_ns;
  stats_.last_load_ns = elapsed_ns;
}

DeviceStats Device::stats() const {
  std::lock_guard<std::mutex> l(stats_mu_);
  return stats_;
}

}  // namespace tfpopef
