// A bounded lock-free single-producer / single-consumer FIFO.
//
// The producer only writes `tail_`, the consumer only writes `head_`; each reads the other's
// counter with acquire ordering, so a slot is published (release) before it can be seen.
// Counters are 64-bit and never wrap in practice; the slot is counter % capacity, so any
// capacity >= 1 works.
//
// Ownership: owns the slots (values are copied in and out; store pointers for zero copy).
// Thread safety: exactly one producer thread (TryPush, FreeSlots) and one consumer thread
// (TryPop, Front) at a time; Size/Empty may be called from either. Callers that need more
// producers serialize them (see QueueManager). Blocking is layered on top by the caller.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tf_popef_op/runtime/cc/base/error.h"

namespace tfpopef {

template <typename T>
class RingBuffer {
 public:
  explicit RingBuffer(size_t capacity) : slots_(capacity), capacity_(capacity) {
    if (capacity == 0) throw Error(ErrorCode::kInvalidArgument, "ring buffer capacity must be at least 1");
  }
  RingBuffer(const RingBuffer&) = delete;
  RingBuffer& operator=(const RingBuffer&) = delete;

  size_t capacity() const { return capacity_; }

  // Producer: false if full.
  bool TryPush(const T& value) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_.load(std::memory_order_acquire) >= capacity_) return false;
    slots_[tail % capacity_] = value;
    tail_.store(tail + 1, std::memory_order_seq_cst);  // seq_cst: pairs with the waiter checks in QueueManager
    return true;
  }

  // Producer: slots guaranteed free for the next pushes (only the consumer can raise it).
  size_t FreeSlots() const {
    return capacity_ - static_cast<size_t>(tail_.load(std::memory_order_relaxed) - head_.load(std::memory_order_acquire));
  }

  // Consumer: the oldest element, or nullptr if empty. Valid until the next TryPop.
  const T* Front() const {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_.load(std::memory_order_acquire)) return nullptr;
    return &slots_[head % capacity_];
  }

  // Consumer: false if empty.
  bool TryPop(T* out) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_.load(std::memory_order_acquire)) return false;
    *out = slots_[head % capacity_];
    head_.store(head + 1, std::memory_order_seq_cst);
    return true;
  }

  size_t Size() const {
    const uint64_t head = head_.load(std::memory_order_acquire);
    return static_cast<size_t>(tail_.load(std::memory_order_acquire) - head);
  }
  bool Empty() const { return Size() == 0; }

 private:
  std::vector<T> slots_;
  const size_t capacity_;
  alignas(64) std::atomic<uint64_t> head_{0};  // next slot to pop; written by the consumer
  alignas(64) std::atomic<uint64_t> tail_{0};  // next slot to push; written by the producer
};

}  // namespace tfpopef
