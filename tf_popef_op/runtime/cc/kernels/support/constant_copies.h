// Float32 copies derived once from a kernel's constant input (float16 weights widened by the
// float16 adapter, GEMM weights packed into panels), made on the first run that sees them and
// reused by every later one. Keyed by the constant's address: the same kernel may run on
// several devices, each with its own copy of the weights. A copy is never changed once
// published (a run holds it by shared_ptr), so runs on other threads can use it meanwhile.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace tfpopef {
namespace kernels {

class ConstantCopies {
 public:
  using Copy = std::shared_ptr<const std::vector<float>>;

  // The copy of `source`; `make()` returns it when there is none yet. It runs outside the lock
  // (runs on other devices need not wait); the first to publish wins.
  template <typename Make>
  Copy Get(const void* source, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (Copy found = FindLocked(source)) return found;
    }
    std::vector<float> made = make();
    std::lock_guard<std::mutex> lock(mu_);
    if (Copy found = FindLocked(source)) return found;
    if (entries_.size() == kMaxDevices) entries_.erase(entries_.begin());  // the oldest device's
    entries_.push_back({source, std::make_shared<const std::vector<float>>(std::move(made))});
    return entries_.back().copy;
  }

 private:
  static constexpr size_t kMaxDevices = 4;
  struct Entry {
    const void* source;
    Copy copy;
  };

  Copy FindLocked(const void* source) const {
    for (const Entry& e : entries_)
      if (e.source == source) return e.copy;
    return nullptr;
  }

  std::mutex mu_;
  std::vector<Entry> entries_;
};

}  // namespace kernels
}  // namespace tfpopef
