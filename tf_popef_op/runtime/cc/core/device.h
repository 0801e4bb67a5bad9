// One emulated IPU: its version, its memory (weights + activation arena of the executable
// loaded on it) and its load statistics.
//
// An IPU holds one executable at a time. Loading another one replaces it; such a reload is
// counted and timed because on real hardware it is the expensive event that model fusion
// avoids.
//
// Ownership: owned by the DeviceManager for the life of the process; Sessions and runners
// keep plain references.
// Thread safety: program execution is serialized by the lock returned by Lock(): only its
// holder may call PrepareLoad/FinishLoad/weights()/arena()/Holds(). stats() may be called
// from any thread at any time.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "tf_popef_op/runtime/cc/base/aligned_buffer.h"

namespace tfpopef {

struct DeviceStats {
  bool has_executable = false;
  uint64_t loaded_hash = 0;   // valid when has_executable
  uint64_t load_count = 0;    // Load programs run
  uint64_t reload_count = 0;  // loads that replaced another executable
  int64_t total_load_ns = 0;
  int64_t last_load_ns = 0;
};

class Device {
 public:
  Device(int id, std::string ipu_version, uint64_t memory_bytes)
      : id_(id), ipu_version_(std::move(ipu_version)), memory_bytes_(memory_bytes) {}
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int id() const { return id_; }
  const std::string& ipu_version() const { return ipu_version_; }
  uint64_t memory_bytes() const { return memory_bytes_; }
  std::string Describe() const { return "device " + std::to_string(id_) + " (" + ipu_version_ + ")"; }

  // Exclusive use of the device: one program (Load or Main) at a time.
  std::unique_lock<std::mutex> Lock() { return std::unique_lock<std::mutex>(run_mu_); }

  // --- Lock() holder only ---
  bool Holds(uint64_t hash) const;
  // Forgets the loaded executable and sizes weight memory and arena for a new one
  // (contents undefined until the Load program fills the weights). The capacity check uses
  // the executable's full weights_bytes (as on an IPU); only `backed_weights_bytes` of host
  // memory are provided, since weights used in place from the PopEF need none.
  void PrepareLoad(uint64_t weights_bytes, uint64_t arena_bytes, uint64_t backed_weights_bytes);
  // Changes whenever PrepareLoad may have moved weights()/arena(): pointers into them that
  // were taken at another generation must be taken again.
  uint64_t load_generation() const { return load_generation_; }
  // Marks the executable `hash` as loaded and records the load time.
  void FinishLoad(uint64_t hash, int64_t elapsed_ns);
  uint8_t* weights() { return weights_.data(); }
  uint8_t* arena() { return arena_.data(); }

  DeviceStats stats() const;

 private:
  const int id_;
  const std::string ipu_version_;
  const uint64_t memory_bytes_;
  std::mutex run_mu_;
  AlignedBuffer weights_, arena_;
  mutable std::mutex stats_mu_;  // guards stats_ (readers must not wait for a running program)
  DeviceStats stats_;
  bool had_executable_ = false;  // an executable was loaded before the current load started
  uint64_t load_generation_ = 1;  // Lock() holder only
};

}  // namespace tfpopef
