// Work items shared out by claims instead of fixed chunks, for kernels whose steps end with one
// thread waiting for the other's last chunk (the pool's chunks are an eighth of a step, or a
// half where each chunk has its own scratch): the items [0, n) are cut into `homes` contiguous
// ranges, range h being thread h's (ParallelForChunks' chunk h), which it claims from the front;
// a thread done with its own claims from the back of the others'. Claims are small near a
// range's end, so the threads finish within about one claim of each other. Each range's
// (front, back) is one atomic on its own cache line, so owners claiming from their own ranges do
// not contend.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace tfpopef {
namespace kernels {

constexpr int64_t kMaxHomeRanges = 16;

class HomeRanges {
 public:
  // n < 2^32 items, 1 <= homes <= kMaxHomeRanges.
  HomeRanges(int64_t n, int64_t homes) : homes_(homes) {
    for (int64_t h = 0; h < homes; ++h) ranges_[h].v.store(Pack(n * h / homes, n * (h + 1) / homes), std::memory_order_relaxed);
  }

  int64_t homes() const { return homes_; }

  // Claims take(front, back) >= 1 items of range h (front <= back: what is left of it) from its
  // front (from_front) or its back. Returns how many (0: the range is empty) and sets *first.
  template <typename Take>
  int64_t Claim(int64_t h, bool from_front, const Take& take, int64_t* first) {
    std::atomic<uint64_t>& range = ranges_[h].v;
    uint64_t r = range.load(std::memory_order_relaxed);
    while (true) {
      const int64_t f = static_cast<int64_t>(r >> 32), b = static_cast<int64_t>(r & 0xffffffffu);
      if (f >= b) return 0;
      const int64_t count = take(f, b);
      const uint64_t next = from_front ? Pack(f + count, b) : Pack(f, b - count);
      if (range.compare_exchange_weak(r, next, std::memory_order_relaxed)) {
        *first = from_front ? f : b - count;
        return count;
      }
    }
  }

  // Thread `home`'s whole share: claims from its own range's front (take_front), then from the
  // backs of the others' (take_back), calling run(first, count) for each claim until all are empty.
  template <typename TakeFront, typename TakeBack, typename Run>
  void RunHome(int64_t home, const TakeFront& take_front, const TakeBack& take_back, const Run& run) {
    int64_t first = 0;
    for (int64_t got; (got = Claim(home, true, take_front, &first)) > 0;) run(first, got);
    for (int64_t i = 1; i < homes_; ++i)
      for (int64_t got; (got = Claim((home + i) % homes_, false, take_back, &first)) > 0;) run(first, got);
  }

 private:
  static uint64_t Pack(int64_t front, int64_t back) {
    return static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(back);
  }
  struct alignas(64) Range {
    std::atomic<uint64_t> v;
  };
  const int64_t homes_;
  std::array<Range, kMaxHomeRanges> ranges_;
};

}  // namespace kernels
}  // namespace tfpopef
