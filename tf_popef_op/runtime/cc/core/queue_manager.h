// Request queues between caller threads (producers) and a runner's device thread (consumer).
//
// One bounded SPSC ring per anchor queue (entries are pointers to caller memory + a row count
// + an opaque request pointer: no tensor data is copied) and one control ring that orders the
// requests. A request pushes its anchor entries first and then itself on the control ring, so
// when the consumer sees a request, its entries are already queued; the consumer pops the
// entries of the queues that request used, in request order.
//
// Knows nothing of models: queues are just names and capacities.
//
// Ownership: owns the rings; never owns what the entries point to.
// Thread safety: with `thread_safe`, any number of producer threads may call Enqueue (they are
// serialized by a mutex); without it, the caller guarantees one producer at a time. One
// consumer thread calls the consumer methods. A full ring blocks the producer on a condition
// variable until the consumer frees a slot (no spinning); an empty control ring blocks the
// consumer the same way, after spinning up to `spin_ns` (a request arriving within that time
// is taken without a wake-up). Close() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/base/ring_buffer.h"

namespace tfpopef {

struct QueueEntry {
  void* data = nullptr;     // caller memory of one tensor of the request
  int64_t rows = 0;         // rows along the batch axis
  void* request = nullptr;  // the request this entry belongs to
};

class QueueManager {
 public:
  using Clock = std::chrono::steady_clock;
  struct QueueSpec {
    std::string name;
    size_t capacity;  // entries
  };

  QueueManager(std::vector<QueueSpec> queues, size_t control_capacity, bool thread_safe, int64_t spin_ns = 0);
  QueueManager(const QueueManager&) = delete;
  QueueManager& operator=(const QueueManager&) = delete;

  size_t queue_count() const { return rings_.size(); }
  const std::string& queue_name(size_t q) const { return names_[q]; }
  size_t queue_capacity(size_t q) const { return rings_[q]->capacity(); }
  size_t control_capacity() const { return control_.capacity(); }

  // --- producers ---
  // Pushes entries[i] onto queue queue_ids[i] (distinct ids), then `request` onto the control
  // ring. Blocks while any of those rings is full. Returns false, enqueuing nothing, once the
  // manager is closed.
  bool Enqueue(void* request, const int* queue_ids, const QueueEntry* entries, size_t count);

  // --- the consumer ---
  // The oldest queued request (not removed), or nullptr when none arrives before `deadline`
  // or the manager is closed and empty.
  void* WaitFront(Clock::time_point deadline);
  void* Front() const;
  // Removes the oldest request; the caller then pops its entries with PopEntry.
  void* PopRequest();
  // The oldest entry of queue `q` (which must hold one: its request was popped).
  QueueEntry PopEntry(int q);

  // Wakes every waiter; later Enqueue calls return false. Queued items stay for the consumer.
  void Close();
  bool closed() const { return closed_.load(); }
  // Returns once no producer is inside Enqueue (call after Close; thread_safe mode only),
  // so a final drain by the consumer sees everything that was accepted.
  void WaitForProducers();

 private:
  bool HasSpace(const int* queue_ids, size_t count) const;
  void NotifySpace();

  std::vector<std::string> names_;
  std::vector<std::unique_ptr<RingBuffer<QueueEntry>>> rings_;
  RingBuffer<void*> control_;
  const bool thread_safe_;
  const int64_t spin_ns_;
  std::mutex producer_mu_;  // serializes producers when thread_safe_
  std::mutex wait_mu_;      // guards the two condition variables
  std::condition_variable space_cv_, data_cv_;
  std::atomic<int> producers_waiting_{0};
  std::atomic<bool> consumer_waiting_{false};
  std::atomic<bool> closed_{false};
};

}  // namespace tfpopef
