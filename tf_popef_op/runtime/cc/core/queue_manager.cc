#include "tf_popef_op/runtime/cc/core/queue_manager.h"

#include <algorithm>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tfpopef {

QueueManager::QueueManager(std::vector<QueueSpec> queues, size_t control_capacity, bool thread_safe, int64_t spin_ns)
    : control_(control_capacity), thread_safe_(thread_safe), spin_ns_(spin_ns) {
  for (auto& q : queues) {
    names_.push_back(q.name);
    rings_.push_back(std::make_unique<RingBuffer<QueueEntry>>(q.capacity));
  }
}

bool QueueManager::HasSpace(const int* queue_ids, size_t count) const {
  if (control_.FreeSlots() == 0) return false;
  for (size_t i = 0; i < count; ++i)
    if (rings_[queue_ids[i]]->FreeSlots() == 0) return false;
  return true;
}

bool QueueManager::Enqueue(void* request, const int* queue_ids, const QueueEntry* entries, size_t count) {
  std::unique_lock<std::mutex> producer;
  if (thread_safe_) producer = std::unique_lock<std::mutex>(producer_mu_);
  if (closed_.load()) return false;
  // Wait until every ring this request needs has a slot, so the push below is all or nothing.
  // Only the consumer frees slots and we are the only producer, so the space stays free.
  if (!HasSpace(queue_ids, count)) {
    std::unique_lock<std::mutex> lk(wait_mu_);
    producers_waiting_.fetch_add(1);
    // seq_cst fences pair with the consumer's: either we see its pop, or it sees us waiting.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    space_cv_.wait(lk, [&] { return closed_.load() || HasSpace(queue_ids, count); });
    producers_waiting_.fetch_sub(1);
    if (closed_.load()) return false;
  }
  for (size_t i = 0; i < count; ++i) rings_[queue_ids[i]]->TryPush(entries[i]);
  control_.TryPush(request);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (consumer_waiting_.load()) {
    std::lock_guard<std::mutex> lk(wait_mu_);
    data_cv_.notify_one();
  }
  return true;
}

void* QueueManager::Front() const {
  void* const* front = control_.Front();
  return front != nullptr ? *front : nullptr;
}

void* QueueManager::WaitFront(Clock::time_point deadline) {
  if (void* r = Front()) return r;
  if (spin_ns_ > 0) {
    const Clock::time_point until = std::min(deadline, Clock::now() + std::chrono::nanoseconds(spin_ns_));
    do {  // yield between polls: a plain spin on an idle core, hands the core over on a busy one
      for (int i = 0; i < 16; ++i) {
        if (void* r = Front()) return r;
        if (closed_.load(std::memory_order_relaxed)) return nullptr;
#if defined(__x86_64__) || defined(__i386__)
        _mm_pause();
#endif
      }
      std::this_thread::yield();
    } while (Clock::now() < until);
  }
  std::unique_lock<std::mutex> lk(wait_mu_);
  consumer_waiting_.store(true);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  void* r = nullptr;
  while ((r = Front()) == nullptr && !closed_.load()) {
    if (deadline == Clock::time_point::max()) {
      data_cv_.wait(lk);
    } else if (data_cv_.wait_until(lk, deadline) == std::cv_status::timeout) {
      r = Front();
      break;
    }
  }
  consumer_waiting_.store(false);
  return r;
}

void* QueueManager::PopRequest() {
  void* r = nullptr;
  control_.TryPop(&r);
  NotifySpace();
  return r;
}

QueueEntry QueueManager::PopEntry(int q) {
  QueueEntry e;
  if (!rings_[q]->TryPop(&e))
    throw Error(ErrorCode::kInternal, "queue '" + names_[q] + "' is empty but its request was dequeued");
  NotifySpace();
  return e;
}

void QueueManager::NotifySpace() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (producers_waiting_.load() > 0) {
    std::lock_guard<std::mutex> lk(wait_mu_);
    space_cv_.notify_all();
  }
}

void QueueManager::Close() {
  {
    std::lock_guard<std::mutex> lk(wait_mu_);
    closed_.store(true);
  }
  space_cv_.notify_all();
  data_cv_.notify_all();
}

void QueueManager::WaitForProducers() {
  if (thread_safe_) {
    std::lock_guard<std::mutex> wait_for_current_producer(producer_mu_);
  }
}

}  // namespace tfpopef
