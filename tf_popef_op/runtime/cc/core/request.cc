#include "tf_popef_op/runtime/cc/core/request.h"

#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tfpopef {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

}  // namespace

void Request::Wait(int64_t spin_ns) const {
  if (Done()) return;
  if (spin_ns > 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns);
    // Yield rather than pause: on an idle core yield returns at once (a plain spin), on an
    // oversubscribed machine it hands the core to the thread we are waiting for.
    do {
      for (int i = 0; i < 16; ++i) {
        if (Done()) return;
        CpuRelax();
      }
      std::this_thread::yield();
    } while (std::chrono::steady_clock::now() < until);
  }
  std::unique_lock<std::mutex> l(mu_);
  sleepers_.fetch_add(1);
  cv_.wait(l, [&] { return Done(); });
  sleepers_.fetch_sub(1);
}

bool Request::WaitFor(std::chrono::nanoseconds timeout) const {
  if (Done()) return true;
  std::unique_lock<std::mutex> l(mu_);
  sleepers_.fetch_add(1);
  const bool done = cv_.wait_for(l, timeout, [&] { return Done(); });
  sleepers_.fetch_sub(1);
  return done;
}

void Request::Complete(std::optional<Error> error, int64_t done_ns) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (Done()) return;
    error_ = std::move(error);
    timing_.done_ns = done_ns;
    done_.store(true, std::memory_order_release);
  }
  // A sleeper registers under mu_ before checking Done(), so after the locked store above
  // either it saw done or it is counted here.
  if (sleepers_.load() > 0) cv_.notify_all();
  if (on_done_) {
    // Moved out so that what it captured is released now, not when a pooled request is reused.
    const std::function<void(const Request&)> on_done = std::move(on_done_);
    on_done_ = nullptr;
    try {
      on_done(*this);
    } catch (...) {
      // A callback must not take down the device thread; the request is already complete.
    }
  }
}

void Request::Reset() {
  subgraph_ = 0;
  rows_ = 0;
  inputs_.clear();
  index_data_ = nullptr;
  queue_ids_.clear();
  queue_data_.clear();
  on_done_ = nullptr;
  bound_.clear();
  rows_taken_ = rows_done_ = 0;
  timing_ = Timing();
  error_.reset();
  done_.store(false, std::memory_order_relaxed);
}

}  // namespace tfpopef
