#include "tf_popef_op/runtime/cc/core/request.h"

namespace tfpopef {

void Request::Wait() const {
  if (Done()) return;
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return Done(); });
}

bool Request::WaitFor(std::chrono::nanoseconds timeout) const {
  if (Done()) return true;
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, timeout, [&] { return Done(); });
}

void Request::Complete(std::optional<Error> error) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (Done()) return;
    error_ = std::move(error);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  if (on_done_) {
    try {
      on_done_(*this);
    } catch (...) {
      // A callback must not take down the device thread; the request is already complete.
    }
  }
}

}  // namespace tfpopef
